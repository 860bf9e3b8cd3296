"""Followers: read another event-sourced application's notification log for the ledger."""
