"""Openers for worker tests, imported by plain name in spawned workers (this folder is on sys.path)."""

from __future__ import annotations

import multiprocessing

import contextledger
from contextledger.domain.errors import StoreError


def opens_only_in_the_parent(url: str | None) -> contextledger.Ledger:
    """An opener that fails in worker processes (a worker that cannot reach the store)."""
    if multiprocessing.parent_process() is not None:
        raise StoreError("the store is out of reach from this worker")
    return contextledger.open_ledger(url)
