"""The in-memory backend (``memory://``): same semantics as the databases, gone with the process."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from threading import RLock
from typing import Any

from contextledger.adapters.store.batch import blob_rows, first_positions, gap, idempotency_rows
from contextledger.adapters.store.erasure import MemoryErasure
from contextledger.adapters.store.eventsourcing_hooks import InMemoryTable
from contextledger.adapters.store.projection_tables import NotificationRow, rows_of_recorder, stale_tracking
from contextledger.adapters.store.session_starts import STARTED_TOPIC
from contextledger.domain.errors import ProjectionLockedError
from contextledger.domain.ports import LeaseHolder, ProjectionCommit
from eventsourcing.persistence import IntegrityError, Notification, StoredEvent

__all__ = ["MemoryProjectionTables", "MemoryRecorder"]


class MemoryProjectionTables:
    """In-memory projection tables (mixed into ``MemoryRecorder``)."""

    database_lock: RLock

    writes_aside = False
    """Nothing to overlap: a commit here holds the GIL throughout."""

    def notification_rows(self, after: int, limit: int) -> list[NotificationRow]:
        """Return stored events after ``after`` through the recorder's own notification read."""
        return rows_of_recorder(self, after, limit)

    def _projection_tables(self) -> dict[str, Any]:
        tables: dict[str, Any] | None = getattr(self, "_ptables", None)
        if tables is None:
            tables = {"tracking": {}, "rows": {}, "active": {}, "leases": {}}
            self._ptables = tables
        return tables

    def projection_checkpoints(self) -> dict[str, int]:
        """Return every checkpoint with its position."""
        with self.database_lock:
            return dict(sorted(self._projection_tables()["tracking"].items()))

    def projection_tracking(self, projection: str) -> int:
        """Return the tracking position."""
        with self.database_lock:
            return int(self._projection_tables()["tracking"].get(projection, 0))

    def projection_commit(self, commits: Sequence[ProjectionCommit], owner: str) -> None:
        """Write every commit's rows and tracking at once (checked first: all or nothing)."""
        del owner
        with self.database_lock:
            tables = self._projection_tables()
            for commit in commits:
                if not commit.tracking_of:
                    continue
                current = int(tables["tracking"].get(commit.tracking_of, 0))
                if commit.tracking < current:
                    raise stale_tracking(commit.tracking_of, current, commit.tracking)
            for commit in commits:
                tables["rows"].setdefault(commit.rows_of, {}).update(commit.rows)
                if commit.tracking_of:
                    tables["tracking"][commit.tracking_of] = commit.tracking

    def projection_range(
        self, projection: str, after_key: str, upto_key: str
    ) -> dict[str, tuple[int, bytes]]:
        """Return the rows with ``after_key < key <= upto_key``."""
        with self.database_lock:
            rows: dict[str, tuple[int, bytes]] = self._projection_tables()["rows"].get(projection, {})
            return {k: v for k, v in rows.items() if after_key < k <= upto_key}

    def projection_row(self, projection: str, key: str) -> tuple[int, bytes] | None:
        """Return one row."""
        with self.database_lock:
            found: tuple[int, bytes] | None = self._projection_tables()["rows"].get(projection, {}).get(key)
            return found

    def projection_rows(self, projection: str, keys: Sequence[str]) -> dict[str, tuple[int, bytes]]:
        """Return the rows of ``keys`` that exist."""
        with self.database_lock:
            rows: dict[str, tuple[int, bytes]] = self._projection_tables()["rows"].get(projection, {})
            return {key: rows[key] for key in keys if key in rows}

    def projection_keys(self, projection: str) -> list[str]:
        """Return the row keys, sorted."""
        with self.database_lock:
            return sorted(self._projection_tables()["rows"].get(projection, {}))

    def projection_drop(self, projection: str) -> None:
        """Delete rows and tracking."""
        with self.database_lock:
            tables = self._projection_tables()
            tables["rows"].pop(projection, None)
            for name in [n for n in tables["tracking"] if n == projection or n.startswith(projection + "@")]:
                del tables["tracking"][name]

    def projection_activate(self, name: str, version: str) -> None:
        """Set the active version."""
        with self.database_lock:
            self._projection_tables()["active"][name] = version

    def projection_active(self, name: str) -> str | None:
        """Return the active version."""
        with self.database_lock:
            found: str | None = self._projection_tables()["active"].get(name)
            return found

    def projection_acquire(self, projection: str, owner: str) -> None:
        """Take the lease or raise ``ProjectionLockedError``."""
        with self.database_lock:
            leases = self._projection_tables()["leases"]
            holder = leases.get(projection)
            if holder is not None and holder != owner:
                raise ProjectionLockedError(projection, holder)
            leases[projection] = owner

    def projection_release(self, projection: str, owner: str) -> None:
        """Give the lease up."""
        with self.database_lock:
            leases = self._projection_tables()["leases"]
            if leases.get(projection) == owner:
                del leases[projection]

    def projection_leases(self, names: Collection[str] | None = None) -> list[LeaseHolder]:
        """The leases this process's memory store holds (of ``names`` only, when given): they last with it."""
        with self.database_lock:
            held = sorted(self._projection_tables()["leases"].items())
        return [
            LeaseHolder(projection=p, holder=o, expires=None, alive=True)
            for p, o in held
            if names is None or p in names
        ]

    def stored_schema_version(self) -> int | None:
        """None: a memory store keeps no schema."""
        return None


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
            positions = [(str(s.originator_id), s.originator_version) for s in stored_events]
            for stream, first in first_positions(positions).items():
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

    def session_starts(self, start: int, limit: int) -> Sequence[Notification]:
        """Up to ``limit`` session starts from notification id ``start``, in order."""
        return self.select_notifications(start, limit, topics=[STARTED_TOPIC])

    def stream_versions(self, stream_ids: Iterable[str]) -> dict[str, int]:
        """Return the last position of each stream."""
        with self.database_lock:
            found: dict[str, int] = {}
            for sid in stream_ids:
                index = self.stream_index(sid)
                if index:
                    found[sid] = next(reversed(index))
            return found
