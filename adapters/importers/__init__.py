"""Importers of real agent transcripts into the ledger (entry points in ``service``)."""

__all__: list[str] = []
