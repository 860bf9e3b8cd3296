"""The SQLite backend (``sqlite:///path.db``): an eventsourcing recorder whose writers queue for the lock.

Every write transaction starts with ``BEGIN IMMEDIATE``: it takes SQLite's write lock before it reads
anything, so concurrent writers (threads or processes) wait up to the busy timeout for their turn. A
deferred transaction that reads first and then writes is refused at once with "database is locked"
when another writer moved in between, which is why eventsourcing's plain ``BEGIN`` is not used here.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from functools import cached_property
from itertools import chain
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote
from uuid import UUID

import msgspec
from contextledger.adapters.store.batch import (
    Extras,
    blob_rows,
    first_positions,
    gap,
    idempotency_rows,
    insert_gathered,
    snapshot_rows,
)
from contextledger.adapters.store.erasure import SQLiteErasure
from contextledger.adapters.store.event_store import RecorderEventStore
from contextledger.adapters.store.mapper import Row
from contextledger.adapters.store.notification_scan import SEPARATOR
from contextledger.adapters.store.projection_tables import SQLITE_PROJECTION_TABLES, SQLiteProjectionTables
from contextledger.adapters.store.session_starts import sqlite_session_starts, sqlite_statements
from contextledger.domain.errors import ConfigError, StoreError, StoreUnavailableError
from eventsourcing.persistence import (
    DatabaseError,
    DataError,
    IntegrityError,
    InterfaceError,
    Notification,
    OperationalError,
    PersistenceError,
    StoredEvent,
)
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteCursor, SQLiteDatastore

__all__ = ["DEFAULT_BUSY_TIMEOUT", "SQLiteRecorder", "open_sqlite", "sqlite_file"]

DEFAULT_BUSY_TIMEOUT = 5.0
"""Seconds a writer queues for another writer's lock before ``StoreUnavailableError`` (``?timeout=``)."""


_SAVE_SNAPSHOT = "INSERT OR REPLACE INTO ledger_snapshots VALUES (?, ?, ?)"
"""Store or replace one ``(name, position, state)`` snapshot row (``save_snapshot``, or with an append)."""

_HEADS_CHUNK = 500
"""Streams whose heads one statement reads (``stream_versions``), far below SQLite's bound parameters."""


def _persistence_error(error: sqlite3.Error) -> PersistenceError:
    """The eventsourcing error for a sqlite3 error (the store maps those into the package's tree)."""
    if isinstance(error, sqlite3.IntegrityError):
        return IntegrityError(str(error))
    if isinstance(error, sqlite3.OperationalError):
        return OperationalError(str(error))
    if isinstance(error, sqlite3.InterfaceError):
        return InterfaceError(str(error))
    if isinstance(error, sqlite3.DataError):
        return DataError(str(error))
    return DatabaseError(str(error))


def _stored_id(originator_id: UUID | str) -> str:
    """A stream id as eventsourcing's SQLite recorder stores and selects it (a UUID as its hex)."""
    return originator_id.hex if isinstance(originator_id, UUID) else originator_id


class SQLiteRecorder(SQLiteErasure, SQLiteProjectionTables, SQLiteApplicationRecorder):
    """SQLite recorder whose inserts also write blobs, the idempotency key and snapshots atomically."""

    WRITES_SNAPSHOTS = True
    """``insert_events`` writes the ``snapshots`` rows it is given in its own transaction."""

    def __init__(self, datastore: SQLiteDatastore, *, events_table_name: str) -> None:
        """Record into ``datastore``'s ``events_table_name``."""
        super().__init__(datastore, events_table_name=events_table_name)
        self._writers = threading.RLock()
        """Held by the thread of this process that writes (re-entered by a nested write)."""

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
            *sqlite_statements(self.events_table_name),
            *SQLITE_PROJECTION_TABLES,
        ]

    @contextmanager
    def writing(self, *, durable: bool = True) -> Iterator[SQLiteCursor]:
        """A write transaction holding SQLite's write lock from its first statement (it queues for it).

        ``durable=False`` commits without waiting for the disk (``synchronous=NORMAL`` under WAL):
        still atomic and kept by a killed process, but the OS may lose it on a power cut. Only
        derived rows that a runner redoes from its (equally lost) checkpoint are written so.
        """
        joined: SQLiteCursor | None = getattr(self._joined, "cursor", None)
        if joined is not None:  # inside insert_event_batches on this thread: its transaction
            yield joined
            return
        with self._writer_turn(), self.datastore.get_connection(commit=True) as conn:
            cursor = conn.cursor()
            # ``executescript`` runs each statement with one release of the GIL (``execute``: two or three),
            # and a commit set aside takes the GIL back from the folding thread at each (ADR 0073). On Python
            # 3.11 it first commits a transaction left open, so it runs only on a connection without one.
            sqlite_conn = cursor.sqlite_cursor.connection
            script = cursor.sqlite_cursor.executescript
            try:
                if sqlite_conn.in_transaction:  # refused as ``BEGIN`` refuses it, never committed
                    raise sqlite3.OperationalError("cannot start a transaction within a transaction")
                # BEGIN IMMEDIATE waits up to the busy timeout for other writers
                script("BEGIN IMMEDIATE" if durable else "PRAGMA synchronous=NORMAL; BEGIN IMMEDIATE")
                try:
                    yield cursor
                    conn.commit()
                except BaseException:
                    conn.rollback()
                    raise
            except sqlite3.Error as error:
                raise _persistence_error(error) from error
            finally:
                # Not inside a transaction (a connection refused above, a rollback that failed): SQLite
                # refuses the setting there, and ``executescript`` would commit it first.
                if not durable and not sqlite_conn.in_transaction:
                    script("PRAGMA synchronous=FULL")
                cursor.sqlite_cursor.close()

    @contextmanager
    def _writer_turn(self) -> Iterator[None]:
        """This process's writers take turns in order (a batch's commit and a count write set aside).

        They would otherwise meet at SQLite's write lock, whose busy handler polls with growing sleeps.
        The turn is waited for up to the busy timeout, past which it ends in ``StoreUnavailableError``
        as SQLite's wait does; a writer of another process is then waited for as before.
        """
        timeout = self.datastore.pool.lock_timeout
        if not self._writers.acquire(timeout=-1 if timeout is None else timeout):
            msg = f"another writer of this process held the ledger for over {timeout} s"
            raise StoreUnavailableError(msg)
        try:
            yield
        finally:
            self._writers.release()

    @cached_property
    def _joined(self) -> threading.local:
        """The cursor of the transaction ``insert_event_batches`` holds open, per thread."""
        return threading.local()

    def insert_event_batches(self, batches: Iterable[tuple[Sequence[StoredEvent], Extras]]) -> None:
        """Insert each batch as it is drawn, all in ONE transaction (ADR 0041): every batch, or none.

        Writes made on this thread while a batch is drawn (a rules snapshot) join the transaction;
        other connections read what was committed before it (WAL). An in-memory database, whose
        readers wait for its writer, draws every batch first and then inserts them as one.
        """
        if self.datastore.pool.is_sqlite_memory_mode:
            insert_gathered(self.insert_events, batches)
            return
        remaining = iter(batches)
        first = next(remaining, None)  # the write lock is taken once the first batch is ready
        if first is None:
            return
        with self.writing() as cursor:
            self._joined.cursor = cursor
            try:
                for stored, extras in chain([first], remaining):
                    self.insert_events(stored, **extras)
            finally:
                self._joined.cursor = None

    def create_table(self) -> None:
        """Create the tables (if absent) in one write transaction."""
        with self.writing() as c:
            for statement in self.create_table_statements:
                c.execute(statement)

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        """Store events, blobs, idempotency keys and snapshots in one ``BEGIN IMMEDIATE`` transaction.

        Returns the events' notification ids, as eventsourcing's ``ApplicationRecorder`` does.
        """
        events = [  # a str id is stored as it is (``_stored_id`` maps only UUIDs)
            (s.originator_id if type(s.originator_id) is str else _stored_id(s.originator_id),
             s.originator_version, s.topic, s.state)
            for s in stored_events
        ]  # fmt: skip
        return self._insert_rows(events, **kwargs)

    def insert_rows(self, events: Sequence[Row], **kwargs: Any) -> list[int]:
        """``insert_events`` of events given as ``(stream as stored, position, topic, state)`` rows.

        The store's append hands its rows so (``MsgspecMapper.rows_many``) when it seals nothing: they are
        the statement's parameters as they are, with no ``StoredEvent`` built per row.
        """
        return self._insert_rows(events, **kwargs)

    def _insert_rows(self, events: Sequence[Row], **kwargs: Any) -> list[int]:
        with self.writing() as c:
            for stream, first in first_positions(events).items():
                c.execute(
                    f"SELECT MAX(originator_version) FROM {self.events_table_name} WHERE originator_id = ?",  # noqa: S608
                    (stream,),
                )
                head = c.fetchone()[0] or 0
                if head != first - 1:
                    raise gap(stream, head, first)
            # One executemany; the write lock is held, so the batch's rowids (notification ids) are
            # consecutive and end at last_insert_rowid(): returned as eventsourcing's contract asks.
            c.executemany(self.insert_events_statement, events)
            c.execute("SELECT last_insert_rowid()")
            last = int(c.fetchone()[0])
            rows = blob_rows(kwargs)
            if rows:
                c.executemany("INSERT OR IGNORE INTO ledger_blobs (sha256, text) VALUES (?, ?)", rows)
            keys = idempotency_rows(kwargs)
            if keys:
                c.executemany("INSERT INTO ledger_idempotency VALUES (?, ?, ?, ?)", keys)
            snapshots = snapshot_rows(kwargs)
            if snapshots:
                c.executemany(_SAVE_SNAPSHOT, snapshots)
        return list(range(last - len(events) + 1, last + 1))

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
        """Store counts for content hashes (existing ones are kept), in key order (each page once).

        The counts go in as one JSON object that SQLite walks itself (``json_each``): one statement
        instead of a Python row and three bound parameters per count, ~30 % less CPU for the
        135,000 counts of a first rebuild (ADR 0055). SQLite also sorts them (``ORDER BY key``),
        without the GIL: sorting 65,536 keys in Python held it ~50 ms, taken from the thread that folds.
        """
        if not counts:
            return
        text = msgspec.json.encode(counts if isinstance(counts, dict) else dict(counts)).decode()
        with self.writing() as c:
            c.execute(
                "INSERT OR IGNORE INTO ledger_token_counts "
                "SELECT ?, key, value FROM json_each(?) ORDER BY key",
                (tokenizer, text),
            )

    def load_snapshot(self, name: str) -> tuple[int, bytes] | None:
        """Return a projection snapshot's position and bytes, or None."""
        with self.datastore.transaction(commit=False) as c:
            c.execute("SELECT position, state FROM ledger_snapshots WHERE name = ?", (name,))
            row = c.fetchone()
        return None if row is None else (int(row[0]), bytes(row[1]))

    def save_snapshot(self, name: str, position: int, state: bytes) -> None:
        """Store or replace a projection snapshot."""
        with self.writing() as c:
            c.execute(_SAVE_SNAPSHOT, (name, position, state))

    def session_starts(self, start: int, limit: int) -> list[Notification]:
        """Up to ``limit`` session starts from notification id ``start``, in order (their partial index)."""
        with self.datastore.transaction(commit=False) as c:
            return sqlite_session_starts(c, self.events_table_name, self.convert_originator_id, start, limit)

    def stream_versions(self, stream_ids: Iterable[str]) -> dict[str, int]:
        """Return the last position of each stream, each by one search of the primary key's index.

        ``MAX(...) WHERE originator_id IN (...) GROUP BY`` reads every row of those streams (~0.6 ms for
        a session of 10,000 events); a correlated ``MAX`` per stream reads the index entry it needs. The
        heads come back joined in one row: fetched row by row, each row took the GIL back (a wait for it
        beside a commit on another thread). Up to ``_HEADS_CHUNK`` streams are one statement, run on
        its own (a statement is its own snapshot): no ``BEGIN`` and ``ROLLBACK`` around it, two of the
        three statements a warm render sent to learn that nothing changed. More are read in one
        transaction, so every chunk sees the same log.
        """
        ids = list(stream_ids)
        if not ids:
            return {}
        if len(ids) <= _HEADS_CHUNK:
            with self.datastore.get_connection(commit=False) as conn, conn.cursor() as c:
                return self._heads(c, ids)
        found: dict[str, int] = {}
        with self.datastore.transaction(commit=False) as c:
            for start in range(0, len(ids), _HEADS_CHUNK):
                found.update(self._heads(c, ids[start : start + _HEADS_CHUNK]))
        return found

    def _heads(self, c: SQLiteCursor, chunk: list[str]) -> dict[str, int]:
        """The heads of up to ``_HEADS_CHUNK`` streams (those with events), joined by SQLite in one row."""
        marks = ",".join(["(?)"] * len(chunk))
        table = self.events_table_name
        head = f"(SELECT MAX(originator_version) FROM {table} WHERE originator_id = ids.id)"  # noqa: S608
        c.execute(  # each stream and its head (0: no event), joined into one row
            f"WITH ids(id) AS (VALUES {marks}) "  # noqa: S608 - the recorder's table
            f"SELECT group_concat(id, char(31)), group_concat(coalesce({head}, 0)) FROM ids",
            chunk,
        )
        streams, heads = c.fetchone()
        named = streams.split(SEPARATOR)
        if len(named) != len(chunk):  # a stream id holding the separator: row by row
            c.execute(f"WITH ids(id) AS (VALUES {marks}) SELECT id, {head} FROM ids", chunk)  # noqa: S608
            return {str(row[0]): int(row[1]) for row in c.fetchall() if row[1] is not None}
        return {stream: at for stream, at in zip(named, map(int, heads.split(",")), strict=True) if at}


def sqlite_file(url: str) -> tuple[Path, dict[str, list[str]]]:
    """Return the absolute file a ``sqlite://`` URL names, and its query options.

    ``sqlite:///var/x.db`` is ``var/x.db`` relative to the working directory; ``sqlite:////var/x.db``
    is the absolute ``/var/x.db``.
    """
    rest = url.removeprefix("sqlite://")
    path, _, query = rest.partition("?")
    if not path.startswith("/") or path == "/":
        msg = f"SQLite URL {url!r} needs a file path: sqlite:///relative.db or sqlite:////absolute.db"
        raise ConfigError(msg)
    return Path(unquote(path[1:])).absolute(), parse_qs(query)


def holds_ledger(file: Path) -> bool:
    """Whether an existing file may hold a ledger: False for an empty file or a database without its tables.

    Read without writing a byte; a file that is no SQLite database at all is left to the store to refuse.

    Opening a store creates its tables: a read-only command opened on another program's database (or an
    empty file) would write a ledger's schema into it.
    """
    if file.stat().st_size == 0:
        return False
    try:
        with closing(sqlite3.connect(f"{file.as_uri()}?mode=ro", uri=True)) as connection:
            found = connection.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'ledger_events'"
            ).fetchone()
    except sqlite3.DatabaseError:  # not a SQLite file at all: opening the store names it (a StoreError)
        return True
    return found is not None


def foreign_database(file: Path) -> bool:
    """Whether an existing SQLite file holds another program's tables and no ledger's (read, nothing written).

    A command that creates a ledger (``import``, ``demo``) wrote the ledger's schema into it.
    """
    if not file.exists() or file.stat().st_size == 0:
        return False
    try:
        with closing(sqlite3.connect(f"{file.as_uri()}?mode=ro", uri=True)) as connection:
            names = {
                row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            }
    except sqlite3.DatabaseError:  # not a SQLite file at all: opening the store names it (a StoreError)
        return False
    return bool(names) and "ledger_events" not in names


def _busy_timeout(url: str, options: dict[str, list[str]]) -> float:
    raw = options.get("timeout", [str(DEFAULT_BUSY_TIMEOUT)])[0]
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        msg = f"SQLite URL {url!r}: timeout must be a positive number of seconds, got {raw!r}"
        raise ConfigError(msg)
    return seconds


def _write_ahead_log(file: Path, timeout: float) -> None:
    """Switch the file to WAL mode (it persists), retrying while another process holds the lock.

    SQLite answers a journal-mode change with "database is locked" at once instead of calling the busy
    handler, so processes that open a new file together would fail; here they wait up to ``timeout``.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            with closing(sqlite3.connect(file, timeout=timeout)) as conn:
                conn.execute("PRAGMA journal_mode=WAL").fetchone()
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.005)
        else:
            return


def _open_error(msg: str, error: BaseException) -> StoreError:
    """The error of a ledger that would not open: unavailable (retry later), or not a ledger at all.

    A file SQLite does not take as a database (``file is not a database``, a damaged one) stays so: a
    ``StoreError`` (exit 5), not ``StoreUnavailableError`` (exit 3, "retry later"); a lock, a missing
    permission and every other operational error may pass.
    """
    cause = error.__cause__ if isinstance(error, PersistenceError) else error
    if isinstance(cause, sqlite3.DatabaseError) and not isinstance(cause, sqlite3.OperationalError):
        return StoreError(msg + " (not a SQLite database, or a damaged one: retrying will not help)")
    return StoreUnavailableError(msg)


def open_sqlite(url: str) -> RecorderEventStore:
    """Open (creating if needed) the SQLite ledger the URL names; its ``url`` names the absolute path."""
    file, options = sqlite_file(url)
    relative = not url.removeprefix("sqlite://").startswith("//")
    where = (
        f" (relative to the working directory; write sqlite:///{file} for an absolute path)"
        if relative
        else ""
    )
    if not file.parent.is_dir():
        msg = f"SQLite URL {url!r} names {file}{where}: folder {file.parent} does not exist"
        raise ConfigError(msg)
    timeout = _busy_timeout(url, options)
    try:
        _write_ahead_log(file, timeout)
    except sqlite3.Error as error:
        raise _open_error(f"cannot open SQLite ledger {file}{where}: {error}", error) from error
    datastore = SQLiteDatastore(db_name=str(file), lock_timeout=timeout, originator_id_type="text")  # type: ignore[arg-type]
    recorder = SQLiteRecorder(datastore, events_table_name="ledger_events")
    try:
        recorder.create_table()  # SQLite's default synchronous=FULL stays: appends are durable
    except (PersistenceError, sqlite3.Error) as error:
        datastore.close()
        raise _open_error(f"cannot open SQLite ledger {file}{where}: {error}", error) from error
    query = url.partition("?")[2]
    absolute = f"sqlite:///{file}" + (f"?{query}" if query else "")
    return RecorderEventStore(recorder, url=absolute, on_close=datastore.close)
