"""The in-memory backend (``memory://``): same semantics as the databases, gone with the process."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from contextledger.adapters.store.batch import blob_rows, first_positions, gap, idempotency_rows
from contextledger.adapters.store.erasure import MemoryErasure
from contextledger.adapters.store.eventsourcing_hooks import InMemoryTable
from contextledger.adapters.store.projection_tables import MemoryProjectionTables
from eventsourcing.persistence import IntegrityError, StoredEvent

__all__ = ["MemoryRecorder"]


class MemoryRecorder(MemoryErasure, MemoryProjectionTables, InMemoryTable):
    """In-memory recorder with the same blob, idempotency, token-count and snapshot semantics."""

    def __init__(self) -> None:
        """Create an empty in-memory store."""
        super().__init__()
        self._blobs: dict[str, str] = {}
        self._idempotency: dict[tuple[str, str], tuple[int, int]] = {}
        self._counts: dict[tuple[str, str], int] = {}
        self._snapshots: dict[str, tuple[int, bytes]] = {}

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        """Store the events, their blobs and idempotency keys at once, or nothing; return notification ids."""
        with self.database_lock:
            keys = idempotency_rows(kwargs)
            used = [(k[0], k[1]) for k in keys if (k[0], k[1]) in self._idempotency]
            if used or len({(k[0], k[1]) for k in keys}) < len(keys):
                msg = f"idempotency key already used: {used or keys}"
                raise IntegrityError(msg)
            self.assert_new(stored_events)
            for stream, first in first_positions(stored_events).items():
                index = self.stream_index(stream)
                head = next(reversed(index)) if index else 0
                if head != first - 1:
                    raise gap(stream, head, first)
            first_id = len(self.rows) + 1
            self.add_rows(stored_events)
            self._blobs.update(blob_rows(kwargs))
            for key in keys:
                self._idempotency[(key[0], key[1])] = (key[2], key[3])
        return list(range(first_id, first_id + len(stored_events)))

    def select_events(
        self,
        originator_id: Any,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> Sequence[StoredEvent]:
        """Return a stream's events in ``(gt, lte]`` by direct lookups, not a scan of the stream.

        The ledger's streams hold contiguous positions 1..n, so a range is computed, not searched
        (eventsourcing's in-memory recorder walks every position of the stream on each read).
        """
        with self.database_lock:
            index = self.stream_index(str(originator_id))
            if not index:
                return []
            last = next(reversed(index))
            low = max(gt or 0, 0) + 1
            high = last if lte is None else min(lte, last)
            positions = range(high, low - 1, -1) if desc else range(low, high + 1)
            if limit is not None:
                positions = positions[:limit]
            rows = self.rows
            return [rows[index[p]] for p in positions if p in index]

    def read_blob(self, sha256: str) -> str | None:
        """Return the text stored under ``sha256``, or None."""
        return self._blobs.get(sha256)

    def load_snapshot(self, name: str) -> tuple[int, bytes] | None:
        """Return a projection snapshot's position and bytes, or None."""
        with self.database_lock:
            return self._snapshots.get(name)

    def save_snapshot(self, name: str, position: int, state: bytes) -> None:
        """Store or replace a projection snapshot."""
        with self.database_lock:
            self._snapshots[name] = (position, state)

    def lookup_idempotency(self, stream_id: str, key: str) -> tuple[int, int] | None:
        """Return the first and last positions stored under an idempotency key, or None."""
        with self.database_lock:
            return self._idempotency.get((stream_id, key))

    def load_token_counts(self, tokenizer: str, keys: Sequence[str]) -> dict[str, int]:
        """Return cached counts for the given content hashes."""
        with self.database_lock:
            return {k: self._counts[(tokenizer, k)] for k in keys if (tokenizer, k) in self._counts}

    def save_token_counts(self, tokenizer: str, counts: Mapping[str, int]) -> None:
        """Store counts for content hashes (existing ones are kept)."""
        with self.database_lock:
            for key, value in counts.items():
                self._counts.setdefault((tokenizer, key), value)

    def stream_versions(self, stream_ids: Iterable[str]) -> dict[str, int]:
        """Return the last position of each stream."""
        with self.database_lock:
            found: dict[str, int] = {}
            for sid in stream_ids:
                index = self.stream_index(sid)
                if index:
                    found[sid] = max(index)
            return found
