"""Importers of real agent transcripts into the ledger."""
