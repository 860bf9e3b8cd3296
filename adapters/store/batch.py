"""What every backend checks and writes in one append: stream heads, blob, idempotency and snapshot rows."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from operator import itemgetter
from typing import Any

from eventsourcing.persistence import IntegrityError, StoredEvent

__all__ = [
    "Extras",
    "blob_rows",
    "first_positions",
    "gap",
    "idempotency_rows",
    "insert_gathered",
    "snapshot_rows",
]

Extras = Mapping[str, Any]
"""Keyword arguments passed through ``insert_events``: ``blobs``, ``idempotency`` and ``snapshots``."""


def first_positions(rows: Sequence[tuple[Any, ...]]) -> dict[str, int]:
    """The first position each stream of a batch writes (its head must be the position before).

    ``rows`` are ``(stream as the backend stores it, position, ...)``; a batch of one stream (the
    common case) is decided in C.
    """
    streams = set(map(itemgetter(0), rows))
    if len(streams) == 1:
        return {streams.pop(): min(map(itemgetter(1), rows))}
    firsts: dict[str, int] = {}
    for row in rows:
        first = firsts.get(row[0])
        if first is None or row[1] < first:
            firsts[row[0]] = row[1]
    return firsts


def gap(stream: str, head: int, first: int) -> IntegrityError:
    """The error of an append that does not start right after the stream's head."""
    return IntegrityError(f"stream {stream!r} is at position {head}: an append at {first} would leave a gap")


def blob_rows(kwargs: Extras) -> list[tuple[str, str]]:
    """The ``(sha256, text)`` rows of the batch's blobs, in key order (a stable lock order)."""
    blobs: Mapping[str, str] = kwargs.get("blobs") or {}
    return sorted(blobs.items())


def idempotency_rows(kwargs: Extras) -> list[tuple[str, str, int, int]]:
    """The ``(stream, key, first, last)`` rows of the batch's idempotency keys."""
    rows: list[tuple[str, str, int, int]] = list(kwargs.get("idempotency") or [])
    return rows


def snapshot_rows(kwargs: Extras) -> list[tuple[str, int, bytes]]:
    """The ``(name, position, state)`` rows of derived snapshots written with the batch (``snapshots``).

    Only a recorder that says so (``WRITES_SNAPSHOTS = True``) is handed them; the store saves them
    after the append for any other.
    """
    rows: list[tuple[str, int, bytes]] = list(kwargs.get("snapshots") or [])
    return rows


def insert_gathered(
    insert_events: Callable[..., object], batches: Iterable[tuple[Sequence[StoredEvent], Extras]]
) -> None:
    """Draw every encoded batch, then insert them all with one ``insert_events`` call (one transaction).

    For a recorder that cannot insert batch by batch in one transaction (memory, SQLite's in-memory
    mode): only the encoded rows are held until the insert, not the drafted events.
    """
    stored: list[StoredEvent] = []
    blobs: dict[str, str] = {}
    keys: list[tuple[str, str, int, int]] = []
    for events, extras in batches:
        stored.extend(events)
        blobs.update(blob_rows(extras))
        keys.extend(idempotency_rows(extras))
    if stored:
        insert_events(stored, blobs=blobs, idempotency=keys)
