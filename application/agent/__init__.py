"""The agent loop: requests and replies through the ledger, its types, and the follower."""
