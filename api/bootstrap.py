"""The composition root: wires the store, tokenizer, clock and id adapters to the core."""

from __future__ import annotations

from contextledger.adapters.store.factory import open_store, resolve_url
from contextledger.adapters.system import SystemClock, UuidSource
from contextledger.domain.ports import Clock, IdSource
from contextledger.ledger import DEFAULT_BLOB_THRESHOLD, Ledger

__all__ = ["open_ledger"]


def open_ledger(
    url: str | None = None,
    *,
    clock: Clock | None = None,
    ids: IdSource | None = None,
    blob_threshold: int = DEFAULT_BLOB_THRESHOLD,
) -> Ledger:
    """Open the ledger at ``url`` (or ``$CONTEXTLEDGER_DB``, or ``sqlite:///contextledger.db``).

    URLs: ``sqlite:///path.db`` (embedded default), ``postgresql://user@host:5432/db`` (add
    ``?schema=name`` for a schema), ``memory://`` (tests and demos).
    """
    store = open_store(resolve_url(url))
    return Ledger(store, clock=clock or SystemClock(), ids=ids or UuidSource(), blob_threshold=blob_threshold)
