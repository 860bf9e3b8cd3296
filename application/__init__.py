"""Use cases: the ledger (append) and the renderer; they reach storage and tokenizers only through ports."""
