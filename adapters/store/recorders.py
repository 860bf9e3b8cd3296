"""eventsourcing application recorders extended with blobs, idempotency keys and token counts.

Each extra row is written inside the same transaction as the events it belongs to, through the
``_insert_events`` hook that eventsourcing calls within its insert transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from eventsourcing.persistence import IntegrityError, StoredEvent
from eventsourcing.popo import POPOApplicationRecorder
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteCursor
from psycopg.sql import SQL, Identifier

__all__ = [
    "Extras",
    "LedgerPOPORecorder",
    "LedgerPostgresRecorder",
    "LedgerSQLiteRecorder",
]

Extras = Mapping[str, Any]
"""Keyword arguments passed through ``insert_events``: ``blobs`` and ``idempotency``."""


def _first_positions(stored_events: Sequence[StoredEvent]) -> dict[str, int]:
    """The first position each stream of a batch writes (its head must be the position before)."""
    firsts: dict[str, int] = {}
    for event in stored_events:
        stream = str(event.originator_id)
        firsts[stream] = min(firsts.get(stream, event.originator_version), event.originator_version)
    return firsts


def _gap(stream: str, head: int, first: int) -> IntegrityError:
    return IntegrityError(f"stream {stream!r} is at position {head}: an append at {first} would leave a gap")


def _blob_rows(kwargs: Extras) -> list[tuple[str, str]]:
    blobs: Mapping[str, str] = kwargs.get("blobs") or {}
    return sorted(blobs.items())


def _idempotency_rows(kwargs: Extras) -> list[tuple[str, str, int, int]]:
    rows: list[tuple[str, str, int, int]] = list(kwargs.get("idempotency") or [])
    return rows


class LedgerSQLiteRecorder(SQLiteApplicationRecorder):
    """SQLite recorder whose inserts also write blobs and the idempotency key atomically."""

    def construct_create_table_statements(self) -> list[str]:
        """Create the events table plus the ledger's side tables."""
        return [
            *super().construct_create_table_statements(),
            "CREATE TABLE IF NOT EXISTS ledger_blobs (sha256 TEXT PRIMARY KEY, text TEXT NOT NULL)",
            (
                "CREATE TABLE IF NOT EXISTS ledger_idempotency (stream_id TEXT, key TEXT, "
                "first_position INTEGER NOT NULL, last_position INTEGER NOT NULL, "
                "PRIMARY KEY (stream_id, key))"
            ),
            (
                "CREATE TABLE IF NOT EXISTS ledger_token_counts (tokenizer TEXT, sha256 TEXT, "
                "tokens INTEGER NOT NULL, PRIMARY KEY (tokenizer, sha256)) WITHOUT ROWID"
            ),
            (
                "CREATE TABLE IF NOT EXISTS ledger_snapshots (name TEXT PRIMARY KEY, "
                "position INTEGER NOT NULL, state BLOB NOT NULL)"
            ),
            (
                f"CREATE INDEX IF NOT EXISTS {self.events_table_name}_topic_idx "
                f"ON {self.events_table_name} (topic)"
            ),
        ]

    def _insert_events(
        self, c: SQLiteCursor, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        for stream, first in _first_positions(stored_events).items():
            c.execute(
                f"SELECT MAX(originator_version) FROM {self.events_table_name} WHERE originator_id = ?",  # noqa: S608
                (stream,),
            )
            head = c.fetchone()[0] or 0
            if head != first - 1:
                raise _gap(stream, head, first)
        # One executemany instead of eventsourcing's execute per row: the ledger never needs the
        # notification ids back (positions come from the stream versions).
        c.executemany(
            self.insert_events_statement,
            [(s.originator_id, s.originator_version, s.topic, s.state) for s in stored_events],
        )
        rows = _blob_rows(kwargs)
        if rows:
            c.executemany("INSERT OR IGNORE INTO ledger_blobs (sha256, text) VALUES (?, ?)", rows)
        keys = _idempotency_rows(kwargs)
        if keys:
            c.executemany("INSERT INTO ledger_idempotency VALUES (?, ?, ?, ?)", keys)
        return None

    def read_blob(self, sha256: str) -> str | None:
        """Return the text stored under ``sha256``, or None."""
        with self.datastore.transaction(commit=False) as c:
            c.execute("SELECT text FROM ledger_blobs WHERE sha256 = ?", (sha256,))
            row = c.fetchone()
        return None if row is None else str(row[0])

    def lookup_idempotency(self, stream_id: str, key: str) -> tuple[int, int] | None:
        """Return the first and last positions stored under an idempotency key, or None."""
        with self.datastore.transaction(commit=False) as c:
            c.execute(
                "SELECT first_position, last_position FROM ledger_idempotency "
                "WHERE stream_id = ? AND key = ?",
                (stream_id, key),
            )
            row = c.fetchone()
        return None if row is None else (int(row[0]), int(row[1]))

    def load_token_counts(self, tokenizer: str, keys: Sequence[str]) -> dict[str, int]:
        """Return cached counts for the given content hashes."""
        found: dict[str, int] = {}
        with self.datastore.transaction(commit=False) as c:
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                c.execute(
                    "SELECT sha256, tokens FROM ledger_token_counts "  # noqa: S608 - only placeholders
                    f"WHERE tokenizer = ? AND sha256 IN ({marks})",
                    (tokenizer, *chunk),
                )
                found.update({str(row[0]): int(row[1]) for row in c.fetchall()})
        return found

    def save_token_counts(self, tokenizer: str, counts: Mapping[str, int]) -> None:
        """Store counts for content hashes (existing ones are kept)."""
        with self.datastore.transaction(commit=True) as c:
            c.executemany(
                "INSERT OR IGNORE INTO ledger_token_counts VALUES (?, ?, ?)",
                [(tokenizer, key, value) for key, value in counts.items()],
            )

    def load_snapshot(self, name: str) -> tuple[int, bytes] | None:
        """Return a projection snapshot's position and bytes, or None."""
        with self.datastore.transaction(commit=False) as c:
            c.execute("SELECT position, state FROM ledger_snapshots WHERE name = ?", (name,))
            row = c.fetchone()
        return None if row is None else (int(row[0]), bytes(row[1]))

    def save_snapshot(self, name: str, position: int, state: bytes) -> None:
        """Store or replace a projection snapshot."""
        with self.datastore.transaction(commit=True) as c:
            c.execute("INSERT OR REPLACE INTO ledger_snapshots VALUES (?, ?, ?)", (name, position, state))

    def stream_versions(self, stream_ids: Iterable[str]) -> dict[str, int]:
        """Return the last position of each stream."""
        ids = list(stream_ids)
        found: dict[str, int] = {}
        with self.datastore.transaction(commit=False) as c:
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                marks = ",".join("?" * len(chunk))
                c.execute(
                    f"SELECT originator_id, MAX(originator_version) FROM {self.events_table_name} "  # noqa: S608
                    f"WHERE originator_id IN ({marks}) GROUP BY originator_id",
                    chunk,
                )
                found.update({str(row[0]): int(row[1]) for row in c.fetchall()})
        return found


class LedgerPostgresRecorder(PostgresApplicationRecorder):
    """PostgreSQL recorder whose inserts also write blobs and the idempotency key atomically."""

    def __init__(self, datastore: PostgresDatastore, *, events_table_name: str = "stored_events") -> None:
        """Create the recorder and register the side tables it needs."""
        super().__init__(datastore, events_table_name=events_table_name)
        prefix = events_table_name.removesuffix("_events")
        self.blobs_table = f"{prefix}_blobs"
        self.idempotency_table = f"{prefix}_idempotency"
        self.counts_table = f"{prefix}_token_counts"
        self.snapshots_table = f"{prefix}_snapshots"
        schema = Identifier(self.datastore.schema)
        self.sql_create_statements.extend(
            [
                SQL("CREATE TABLE IF NOT EXISTS {}.{} (sha256 text PRIMARY KEY, text text NOT NULL)").format(
                    schema, Identifier(self.blobs_table)
                ),
                SQL(
                    "CREATE TABLE IF NOT EXISTS {}.{} (stream_id text, key text, "
                    "first_position bigint NOT NULL, last_position bigint NOT NULL, "
                    "PRIMARY KEY (stream_id, key))"
                ).format(schema, Identifier(self.idempotency_table)),
                SQL(
                    "CREATE TABLE IF NOT EXISTS {}.{} (tokenizer text, sha256 text, tokens bigint NOT NULL, "
                    "PRIMARY KEY (tokenizer, sha256))"
                ).format(schema, Identifier(self.counts_table)),
                SQL(
                    "CREATE TABLE IF NOT EXISTS {}.{} (name text PRIMARY KEY, position bigint NOT NULL, "
                    "state bytea NOT NULL)"
                ).format(schema, Identifier(self.snapshots_table)),
                SQL("CREATE INDEX IF NOT EXISTS {} ON {}.{} (topic)").format(
                    Identifier(f"{events_table_name}_topic_idx"), schema, Identifier(events_table_name)
                ),
            ]
        )

    def _table(self, name: str) -> SQL | Any:
        return SQL("{}.{}").format(Identifier(self.datastore.schema), Identifier(name))

    def _insert_events(self, curs: Any, stored_events: Sequence[StoredEvent], **kwargs: Any) -> None:
        for stream, first in _first_positions(stored_events).items():
            curs.execute(
                SQL("SELECT MAX(originator_version) AS head FROM {} WHERE originator_id = %s").format(
                    self._table(self.events_table_name)
                ),
                (stream,),
            )
            row = curs.fetchone()
            head = (row["head"] if row else None) or 0
            if head != first - 1:
                raise _gap(stream, head, first)
        rows = _blob_rows(kwargs)
        if rows:
            curs.executemany(
                SQL("INSERT INTO {} (sha256, text) VALUES (%s, %s) ON CONFLICT DO NOTHING").format(
                    self._table(self.blobs_table)
                ),
                rows,
            )
        keys = _idempotency_rows(kwargs)
        if keys:
            curs.executemany(
                SQL("INSERT INTO {} VALUES (%s, %s, %s, %s)").format(self._table(self.idempotency_table)),
                keys,
            )

    def read_blob(self, sha256: str) -> str | None:
        """Return the text stored under ``sha256``, or None."""
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(
                SQL("SELECT text FROM {} WHERE sha256 = %s").format(self._table(self.blobs_table)), (sha256,)
            )
            row = curs.fetchone()
        return None if row is None else str(row["text"])

    def lookup_idempotency(self, stream_id: str, key: str) -> tuple[int, int] | None:
        """Return the first and last positions stored under an idempotency key, or None."""
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(
                SQL("SELECT first_position, last_position FROM {} WHERE stream_id = %s AND key = %s").format(
                    self._table(self.idempotency_table)
                ),
                (stream_id, key),
            )
            row = curs.fetchone()
        return None if row is None else (int(row["first_position"]), int(row["last_position"]))

    def load_token_counts(self, tokenizer: str, keys: Sequence[str]) -> dict[str, int]:
        """Return cached counts for the given content hashes."""
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(
                SQL("SELECT sha256, tokens FROM {} WHERE tokenizer = %s AND sha256 = ANY(%s)").format(
                    self._table(self.counts_table)
                ),
                (tokenizer, list(keys)),
            )
            return {str(row["sha256"]): int(row["tokens"]) for row in curs.fetchall()}

    def save_token_counts(self, tokenizer: str, counts: Mapping[str, int]) -> None:
        """Store counts for content hashes (existing ones are kept)."""
        with self.datastore.transaction(commit=True) as curs:
            curs.executemany(
                SQL("INSERT INTO {} VALUES (%s, %s, %s) ON CONFLICT DO NOTHING").format(
                    self._table(self.counts_table)
                ),
                [(tokenizer, key, value) for key, value in counts.items()],
            )

    def load_snapshot(self, name: str) -> tuple[int, bytes] | None:
        """Return a projection snapshot's position and bytes, or None."""
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(
                SQL("SELECT position, state FROM {} WHERE name = %s").format(
                    self._table(self.snapshots_table)
                ),
                (name,),
            )
            row = curs.fetchone()
        return None if row is None else (int(row["position"]), bytes(row["state"]))

    def save_snapshot(self, name: str, position: int, state: bytes) -> None:
        """Store or replace a projection snapshot."""
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(
                SQL(
                    "INSERT INTO {} VALUES (%s, %s, %s) ON CONFLICT (name) "
                    "DO UPDATE SET position = EXCLUDED.position, state = EXCLUDED.state"
                ).format(self._table(self.snapshots_table)),
                (name, position, state),
            )

    def stream_versions(self, stream_ids: Iterable[str]) -> dict[str, int]:
        """Return the last position of each stream."""
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(
                SQL(
                    "SELECT originator_id, MAX(originator_version) AS v FROM {} "
                    "WHERE originator_id = ANY(%s) GROUP BY originator_id"
                ).format(self._table(self.events_table_name)),
                (list(stream_ids),),
            )
            return {str(row["originator_id"]): int(row["v"]) for row in curs.fetchall()}


class LedgerPOPORecorder(POPOApplicationRecorder):
    """In-memory recorder with the same blob, idempotency and token-count semantics."""

    def __init__(self) -> None:
        """Create an empty in-memory store."""
        super().__init__()
        self._blobs: dict[str, str] = {}
        self._idempotency: dict[tuple[str, str], tuple[int, int]] = {}
        self._counts: dict[tuple[str, str], int] = {}
        self._snapshots: dict[str, tuple[int, bytes]] = {}

    def _insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        with self._database_lock:
            keys = _idempotency_rows(kwargs)
            used = [(k[0], k[1]) for k in keys if (k[0], k[1]) in self._idempotency]
            if used or len({(k[0], k[1]) for k in keys}) < len(keys):
                msg = f"idempotency key already used: {used or keys}"
                raise IntegrityError(msg)
            self._assert_uniqueness(stored_events, **kwargs)
            for stream, first in _first_positions(stored_events).items():
                index = self._stored_events_index.get(stream)
                head = next(reversed(index)) if index else 0
                if head != first - 1:
                    raise _gap(stream, head, first)
            ids = self._update_table(stored_events, **kwargs)
            self._blobs.update(_blob_rows(kwargs))
            for key in keys:
                self._idempotency[(key[0], key[1])] = (key[2], key[3])
            return ids

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
        with self._database_lock:
            index = self._stored_events_index.get(str(originator_id))
            if not index:
                return []
            last = next(reversed(index))
            low = max(gt or 0, 0) + 1
            high = last if lte is None else min(lte, last)
            positions = range(high, low - 1, -1) if desc else range(low, high + 1)
            if limit is not None:
                positions = positions[:limit]
            return [self._stored_events[index[p]] for p in positions if p in index]

    def read_blob(self, sha256: str) -> str | None:
        """Return the text stored under ``sha256``, or None."""
        return self._blobs.get(sha256)

    def load_snapshot(self, name: str) -> tuple[int, bytes] | None:
        """Return a projection snapshot's position and bytes, or None."""
        with self._database_lock:
            return self._snapshots.get(name)

    def save_snapshot(self, name: str, position: int, state: bytes) -> None:
        """Store or replace a projection snapshot."""
        with self._database_lock:
            self._snapshots[name] = (position, state)

    def lookup_idempotency(self, stream_id: str, key: str) -> tuple[int, int] | None:
        """Return the first and last positions stored under an idempotency key, or None."""
        with self._database_lock:
            return self._idempotency.get((stream_id, key))

    def load_token_counts(self, tokenizer: str, keys: Sequence[str]) -> dict[str, int]:
        """Return cached counts for the given content hashes."""
        with self._database_lock:
            return {k: self._counts[(tokenizer, k)] for k in keys if (tokenizer, k) in self._counts}

    def save_token_counts(self, tokenizer: str, counts: Mapping[str, int]) -> None:
        """Store counts for content hashes (existing ones are kept)."""
        with self._database_lock:
            for key, value in counts.items():
                self._counts.setdefault((tokenizer, key), value)

    def stream_versions(self, stream_ids: Iterable[str]) -> dict[str, int]:
        """Return the last position of each stream."""
        with self._database_lock:
            return {
                sid: max(self._stored_events_index[sid])
                for sid in stream_ids
                if self._stored_events_index.get(sid)
            }
