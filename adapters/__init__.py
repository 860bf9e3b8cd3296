"""Adapters: everything that does I/O (stores, tokenizers, wire formats, importers, CLI)."""
