"""Projection tables (rows + tracking + active-version registry + one-writer lease) for memory and SQLite."""

from __future__ import annotations

import functools
import json
import os
import socket
import time
from collections.abc import Collection, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any, Protocol, cast

from contextledger.adapters.store.notification_scan import SEPARATOR, NotificationScan, joined_rows, scan_sql
from contextledger.adapters.store.sqlite_commit import Behind, write_commit
from contextledger.adapters.system import process_alive
from contextledger.domain.errors import ProjectionLockedError, StoreError
from contextledger.domain.ports import LeaseHolder, ProjectionCommit

__all__ = [
    "LEASE_SECONDS",
    "SQLITE_PROJECTION_TABLES",
    "SQLITE_SCHEMA_VERSION",
    "NotificationRow",
    "ProjectionTables",
    "SQLiteProjectionTables",
    "holder_alive",
    "new_owner",
    "rows_of_recorder",
    "stale_tracking",
]

LEASE_SECONDS = 30.0
"""A runner's lease lasts this long past its last commit; a holder on this host that died frees it at once."""

SQLITE_SCHEMA_VERSION = 1
"""The SQLite layout's version, recorded in ``ledger_meta`` when its tables are created (``doctor``)."""

SQLITE_PROJECTION_TABLES = [
    (
        "CREATE TABLE IF NOT EXISTS ledger_projection_tracking (projection TEXT PRIMARY KEY, "
        "position INTEGER NOT NULL)"
    ),
    (
        "CREATE TABLE IF NOT EXISTS ledger_projection_rows (projection TEXT, key TEXT, "
        "position INTEGER NOT NULL, state BLOB NOT NULL, PRIMARY KEY (projection, key)) WITHOUT ROWID"
    ),
    "CREATE TABLE IF NOT EXISTS ledger_projection_active (name TEXT PRIMARY KEY, version TEXT NOT NULL)",
    (
        "CREATE TABLE IF NOT EXISTS ledger_projection_leases (projection TEXT PRIMARY KEY, "
        "owner TEXT NOT NULL, expires REAL NOT NULL)"
    ),
    "CREATE TABLE IF NOT EXISTS ledger_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    f"INSERT OR IGNORE INTO ledger_meta VALUES ('schema', '{SQLITE_SCHEMA_VERSION}')",  # noqa: S608 - a constant
]


def new_owner() -> str:
    """A lease owner name: ``host:pid:nonce``."""
    return f"{socket.gethostname()}:{os.getpid()}:{os.urandom(4).hex()}"


def holder_alive(owner: str, expires: float) -> bool:
    """Whether a lease holder may still be running: unexpired, and (on this host) its process exists."""
    if expires <= time.time():
        return False
    host, _, rest = owner.partition(":")
    if host != socket.gethostname():
        return True
    pid = rest.partition(":")[0]
    return pid.isdigit() and process_alive(int(pid))


def stale_tracking(projection: str, current: int, tracking: int) -> StoreError:
    """The error of a commit that would move a checkpoint back (a runner behind another)."""
    msg = f"projection {projection!r} is at {current}; a commit at {tracking} would move it back"
    return StoreError(msg)


_JOINED_ROWS = (
    "SELECT count(*), group_concat(key, char(31)), group_concat(position), group_concat(length(state)), "
    "CAST(group_concat(state, x'') AS BLOB) FROM ledger_projection_rows WHERE projection = ? "
    "AND key IN (SELECT value FROM json_each(?))"
)
"""The rows of a JSON array of keys, joined into one row (``joined_rows`` splits it)."""

_scan_sql = functools.cache(scan_sql)
"""The scan query of an events table, built once."""

NotificationRow = tuple[int, str, int, str, bytes]
"""A stored event in store order: notification id, stream, position, topic, payload."""


def rows_of_recorder(recorder: object, after: int, limit: int) -> list[NotificationRow]:
    """Stored events after ``after`` as tuples, via a recorder's ``select_notifications``."""
    return [
        (n.id, str(n.originator_id), n.originator_version, n.topic, n.state)
        for n in cast("Any", recorder).select_notifications(after + 1, limit)
    ]


class ProjectionTables(Protocol):
    """What ``RecorderProjections`` needs of a recorder."""

    @property
    def writes_aside(self) -> bool:
        """Whether a commit may run on another thread while this one reads (readers never wait for it)."""
        ...

    def notification_rows(self, after: int, limit: int) -> list[NotificationRow]:
        """Return up to ``limit`` stored events with notification ids above ``after``, in id order."""
        ...

    def projection_tracking(self, projection: str) -> int:
        """Return the tracking position."""
        ...

    def projection_checkpoints(self) -> dict[str, int]:
        """Return every checkpoint with its position."""
        ...

    def projection_commit(self, commits: Sequence[ProjectionCommit], owner: str) -> None:
        """Write every commit's rows and tracking atomically (renewing ``owner``'s leases)."""
        ...

    def projection_range(
        self, projection: str, after_key: str, upto_key: str
    ) -> dict[str, tuple[int, bytes]]:
        """Return the rows with ``after_key < key <= upto_key``."""
        ...

    def projection_row(self, projection: str, key: str) -> tuple[int, bytes] | None:
        """Return one row."""
        ...

    def projection_rows(self, projection: str, keys: Sequence[str]) -> dict[str, tuple[int, bytes]]:
        """Return the rows of ``keys`` that exist."""
        ...

    def projection_keys(self, projection: str) -> list[str]:
        """Return the row keys, sorted."""
        ...

    def projection_drop(self, projection: str) -> None:
        """Delete rows and tracking."""
        ...

    def projection_activate(self, name: str, version: str) -> None:
        """Set the active version."""
        ...

    def projection_active(self, name: str) -> str | None:
        """Return the active version."""
        ...

    def projection_acquire(self, projection: str, owner: str) -> None:
        """Take the lease or raise ``ProjectionLockedError``."""
        ...

    def projection_release(self, projection: str, owner: str) -> None:
        """Give the lease up."""
        ...

    def projection_leases(self, names: Collection[str] | None = None) -> list[LeaseHolder]:
        """Every lease held (or left by a holder that died); of ``names`` only, when given."""
        ...

    def stored_schema_version(self) -> int | None:
        """The schema version the database records (None: none is kept)."""
        ...


class SQLiteProjectionTables:
    """SQLite projection tables (mixed into ``SQLiteRecorder``); writes run under ``BEGIN IMMEDIATE``."""

    datastore: Any

    events_table_name: str

    def writing(self, *, durable: bool = True) -> AbstractContextManager[Any]:
        """A write transaction (provided by the recorder)."""
        raise NotImplementedError

    @property
    def writes_aside(self) -> bool:
        """A file under WAL: yes; a database in memory shares one cache, whose readers wait for the writer."""
        return not self.datastore.pool.is_sqlite_memory_mode

    def notification_rows(self, after: int, limit: int) -> list[NotificationRow]:
        """Return stored events after ``after`` as plain tuples (rebuilds read millions)."""
        with self.datastore.transaction(commit=False) as c:
            cursor = c.sqlite_cursor
            cursor.row_factory = None  # plain tuples
            cursor.execute(
                "SELECT rowid, originator_id, originator_version, topic, state "  # noqa: S608
                f"FROM {self.events_table_name} WHERE rowid > ? ORDER BY rowid LIMIT ?",
                (after, limit),
            )
            rows: list[NotificationRow] = cursor.fetchall()
            return rows

    def notification_scan(self, after: int, limit: int) -> NotificationScan:
        """Return stored events after ``after`` gathered by SQLite (``notification_scan``), GIL released."""
        with self.datastore.transaction(commit=False) as c:
            cursor = c.sqlite_cursor
            cursor.row_factory = None
            cursor.execute(_scan_sql(self.events_table_name), (after, limit))
            count, last_id, total, *joined = cursor.fetchone()
        if not count:
            return NotificationScan(0, 0, 0, "", "", "", "", b"")
        return NotificationScan(count, last_id, total, *joined)

    def projection_checkpoints(self) -> dict[str, int]:
        """Return every checkpoint with its position."""
        with self.datastore.transaction(commit=False) as c:
            c.execute("SELECT projection, position FROM ledger_projection_tracking ORDER BY projection")
            return {str(row[0]): int(row[1]) for row in c.fetchall()}

    def projection_tracking(self, projection: str) -> int:
        """Return the tracking position."""
        with self.datastore.transaction(commit=False) as c:
            c.execute("SELECT position FROM ledger_projection_tracking WHERE projection = ?", (projection,))
            row = c.fetchone()
        return 0 if row is None else int(row[0])

    def projection_commit(self, commits: Sequence[ProjectionCommit], owner: str) -> None:
        """Write every commit's rows, tracking and lease renewal in one ``BEGIN IMMEDIATE`` transaction.

        Rows and checkpoints are derived from the log, so the commit does not wait for the disk: a
        power cut may undo the last batches (rows and checkpoint together), which the runner redoes.
        """
        tracked = [(commit.tracking_of, commit.tracking) for commit in commits if commit.tracking_of]
        rows = [(c.rows_of, key, at, state) for c in commits for key, (at, state) in c.rows.items()]
        # A handful of statements whatever the commit holds: each one the writer's thread runs takes the
        # GIL back from the folding thread when it returns (ADR 0073).
        try:
            with self.writing(durable=False) as c:
                write_commit(c, tracked, rows, owner, time.time() + LEASE_SECONDS)
        except Behind:
            raise self._behind(tracked) from None

    def _behind(self, tracked: list[tuple[str, int]]) -> StoreError:
        """The error of the first checkpoint that would move back, from the positions as committed.

        The commit's checks, in order, as they ran before one statement moved every checkpoint (each
        against the one before it).
        """
        current = self.projection_checkpoints()
        for name, tracking in tracked:
            at = current.get(name, 0)
            if tracking < at:
                return stale_tracking(name, at, tracking)
            current[name] = tracking
        name, tracking = tracked[0]  # moved meanwhile by another process: named as it now is
        return stale_tracking(name, current.get(name, 0), tracking)

    def projection_range(
        self, projection: str, after_key: str, upto_key: str
    ) -> dict[str, tuple[int, bytes]]:
        """Return the rows with ``after_key < key <= upto_key`` (one range scan of the primary key)."""
        with self.datastore.transaction(commit=False) as c:
            c.execute(
                "SELECT key, position, state FROM ledger_projection_rows WHERE projection = ? "
                "AND key > ? AND key <= ?",
                (projection, after_key, upto_key),
            )
            return {str(row[0]): (int(row[1]), bytes(row[2])) for row in c.fetchall()}

    def projection_row(self, projection: str, key: str) -> tuple[int, bytes] | None:
        """Return one row."""
        with self.datastore.transaction(commit=False) as c:
            c.execute(
                "SELECT position, state FROM ledger_projection_rows WHERE projection = ? AND key = ?",
                (projection, key),
            )
            row = c.fetchone()
        return None if row is None else (int(row[0]), bytes(row[1]))

    def projection_rows(self, projection: str, keys: Sequence[str]) -> dict[str, tuple[int, bytes]]:
        """Return the rows of ``keys`` that exist, in one query (keys passed as one JSON array).

        SQLite joins the rows into one (``joined_rows``): fetched row by row, each row took the GIL
        back, and beside a commit on another thread each of those waited for it.
        """
        wanted = json.dumps(list(keys))
        with self.datastore.transaction(commit=False) as c:
            c.execute(_JOINED_ROWS, (projection, wanted))
            found = joined_rows(*c.fetchone())
            if found is None:  # a key holding the separator: row by row
                c.execute(
                    "SELECT key, position, state FROM ledger_projection_rows WHERE projection = ? "
                    "AND key IN (SELECT value FROM json_each(?))",
                    (projection, wanted),
                )
                found = {str(row[0]): (int(row[1]), bytes(row[2])) for row in c.fetchall()}
            return found

    def projection_keys(self, projection: str) -> list[str]:
        """Return the row keys, sorted (joined by SQLite into one row, as ``projection_rows``'s rows)."""
        with self.datastore.transaction(commit=False) as c:
            c.execute(
                "SELECT count(*), group_concat(key, char(31)) FROM ledger_projection_rows "
                "WHERE projection = ?",
                (projection,),
            )
            count, joined = c.fetchone()
            keys = joined.split(SEPARATOR) if count else []
            if len(keys) != count:  # a key holding the separator: row by row
                c.execute("SELECT key FROM ledger_projection_rows WHERE projection = ?", (projection,))
                keys = [str(row[0]) for row in c.fetchall()]
            return sorted(keys)

    def projection_drop(self, projection: str) -> None:
        """Delete rows and tracking."""
        with self.writing() as c:
            c.execute("DELETE FROM ledger_projection_rows WHERE projection = ?", (projection,))
            c.execute(  # its own checkpoint and its shards' (``<name>@i/n``)
                "DELETE FROM ledger_projection_tracking WHERE projection = ? "
                "OR substr(projection, 1, length(?) + 1) = ? || '@'",
                (projection, projection, projection),
            )

    def projection_activate(self, name: str, version: str) -> None:
        """Set the active version."""
        with self.writing() as c:
            c.execute("INSERT OR REPLACE INTO ledger_projection_active VALUES (?, ?)", (name, version))

    def projection_active(self, name: str) -> str | None:
        """Return the active version."""
        with self.datastore.transaction(commit=False) as c:
            c.execute("SELECT version FROM ledger_projection_active WHERE name = ?", (name,))
            row = c.fetchone()
        return None if row is None else str(row[0])

    def projection_acquire(self, projection: str, owner: str) -> None:
        """Take the lease (a row with an expiry) unless a live holder has it.

        Written without waiting for the disk (``durable=False``): a lease only keeps two live runners
        apart, and a power cut that could lose the write stops every holder too.
        """
        with self.writing(durable=False) as c:
            c.execute(
                "SELECT owner, expires FROM ledger_projection_leases WHERE projection = ?", (projection,)
            )
            row = c.fetchone()
            if row is not None and str(row[0]) != owner and holder_alive(str(row[0]), float(row[1])):
                raise ProjectionLockedError(projection, str(row[0]))
            c.execute(
                "INSERT OR REPLACE INTO ledger_projection_leases VALUES (?, ?, ?)",
                (projection, owner, time.time() + LEASE_SECONDS),
            )

    def projection_release(self, projection: str, owner: str) -> None:
        """Give the lease up (not waiting for the disk: a release lost leaves a dead holder's lease)."""
        with self.writing(durable=False) as c:
            c.execute(
                "DELETE FROM ledger_projection_leases WHERE projection = ? AND owner = ?", (projection, owner)
            )

    def projection_leases(self, names: Collection[str] | None = None) -> list[LeaseHolder]:
        """Every lease row (of ``names`` only, when given): a dead holder's stays listed, not alive."""
        with self.datastore.transaction(commit=False) as c:
            c.execute("SELECT projection, owner, expires FROM ledger_projection_leases ORDER BY projection")
            rows = c.fetchall()
        return [
            LeaseHolder(
                projection=str(p),
                holder=str(o),
                expires=datetime.fromtimestamp(float(e), UTC),
                alive=holder_alive(str(o), float(e)),
            )
            for p, o, e in rows
            if names is None or str(p) in names
        ]

    def stored_schema_version(self) -> int | None:
        """The ``schema`` entry of ``ledger_meta`` (written when the tables are created)."""
        with self.datastore.transaction(commit=False) as c:
            c.execute("SELECT value FROM ledger_meta WHERE key = 'schema'")
            row = c.fetchone()
        return None if row is None else int(row[0])
