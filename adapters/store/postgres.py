"""The PostgreSQL backend (``postgresql://user@host:port/db?schema=name``): bounded waits, no pipeline.

An append is one statement, the ``<table>_append`` function (ADR 0031: no table lock; see
``postgres_horizon``). eventsourcing's recorder sends its insert in psycopg's pipeline mode, which hung
for good on large batches (the client blocked in the pipeline ``sync`` while the server waited in
``ClientRead``); arrays go through ``unnest`` instead (no ``executemany``, which pipelines too).
Every wait is bounded: the connect timeout, the pool timeout, and the server's ``statement_timeout``,
``lock_timeout`` and ``idle_in_transaction_session_timeout`` (set on each connection) all end in
``StoreUnavailableError``; a failed transaction writes nothing.
Schema setup runs under an advisory lock, so processes opening one schema at once do not race.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any

import psycopg
from contextledger.adapters.store.batch import Extras, blob_rows, idempotency_rows
from contextledger.adapters.store.event_store import RecorderEventStore
from contextledger.adapters.store.postgres_append import OneEventAppend
from contextledger.adapters.store.postgres_erasure import PostgresErasure
from contextledger.adapters.store.postgres_horizon import (
    PostgresNotificationLog,
    append_statement,
    horizon_statements,
    notify_statement,
    persistence_error,
    persistence_errors,
    postgres_session_starts,
    stream_key,
)
from contextledger.adapters.store.postgres_import import stage_and_append
from contextledger.adapters.store.postgres_notify import NOTIFY_INTERVAL, CommitNotifier
from contextledger.adapters.store.postgres_options import connection_settings
from contextledger.adapters.store.postgres_projections import PostgresProjectionTables, projection_statements
from contextledger.adapters.store.postgres_schema import SCHEMA_VERSION, PostgresSchema, postgres_statements
from contextledger.domain.errors import StoreUnavailableError
from eventsourcing.persistence import Notification, PersistenceError, StoredEvent
from eventsourcing.postgres import ConnectionPool, PostgresApplicationRecorder, PostgresDatastore
from psycopg.rows import DictRow, dict_row, tuple_row
from psycopg.sql import SQL, Composed, Identifier

__all__ = ["SCHEMA_VERSION", "PostgresRecorder", "open_postgres"]


def _autocommit(conn: psycopg.Connection[Any]) -> None:
    conn.autocommit = True


class PostgresRecorder(
    PostgresSchema,
    PostgresErasure,
    PostgresProjectionTables,
    PostgresNotificationLog,
    PostgresApplicationRecorder,
):
    """PostgreSQL recorder whose inserts also write blobs and the idempotency key atomically."""

    def __init__(
        self,
        datastore: PostgresDatastore,
        *,
        events_table_name: str = "stored_events",
        notify_interval: float = NOTIFY_INTERVAL,
    ) -> None:
        """Create the recorder and register the side tables it needs."""
        super().__init__(datastore, events_table_name=events_table_name)
        prefix = events_table_name.removesuffix("_events")
        self.blobs_table = f"{prefix}_blobs"
        self.idempotency_table = f"{prefix}_idempotency"
        self.counts_table = f"{prefix}_token_counts"
        self.snapshots_table = f"{prefix}_snapshots"
        self.meta_table = f"{prefix}_meta"
        self.events = self._table(events_table_name)
        self.sql_create_statements.extend(
            [
                SQL("CREATE TABLE IF NOT EXISTS {} (sha256 text PRIMARY KEY, utf8 bytea NOT NULL)").format(
                    self._table(self.blobs_table)
                ),
                SQL(
                    "CREATE TABLE IF NOT EXISTS {} (stream_id text, key text, "
                    "first_position bigint NOT NULL, last_position bigint NOT NULL, "
                    "PRIMARY KEY (stream_id, key))"
                ).format(self._table(self.idempotency_table)),
                SQL(
                    "CREATE TABLE IF NOT EXISTS {} (tokenizer text, sha256 text, tokens bigint NOT NULL, "
                    "PRIMARY KEY (tokenizer, sha256))"
                ).format(self._table(self.counts_table)),
                SQL(
                    "CREATE TABLE IF NOT EXISTS {} (name text PRIMARY KEY, position bigint NOT NULL, "
                    "state bytea NOT NULL)"
                ).format(self._table(self.snapshots_table)),
                *postgres_statements(datastore.schema, events_table_name, self.events),
                SQL("CREATE TABLE IF NOT EXISTS {} (key text PRIMARY KEY, value bigint NOT NULL)").format(
                    self._table(self.meta_table)
                ),
                *projection_statements(datastore.schema, prefix),
                *horizon_statements(
                    datastore.schema,
                    events_table_name,
                    blobs=self.blobs_table,
                    keys=self.idempotency_table,
                ),
            ]
        )
        self._append = append_statement(datastore.schema, events_table_name).as_bytes(None)
        self._append_one = OneEventAppend(datastore.schema, events_table_name).run
        self._notify = notify_statement(self.channel_name)
        self.notifier = CommitNotifier(self._send_notify, interval=notify_interval)
        """Sends the NOTIFY after appends have committed, at most one per interval (ADR 0047)."""
        self._function = SQL("{}.{}").format(
            Identifier(datastore.schema), Identifier(f"{events_table_name}_append")
        )
        self._turns = threading.local()
        """Per thread: the connection holding each stream's writer turn (its appends go through it)."""

    @contextmanager
    def _connection(self, stream_id: str | None = None) -> Iterator[psycopg.Connection[DictRow]]:
        """The connection holding ``stream_id``'s writer turn in this thread, else one from the pool."""
        held: dict[str, psycopg.Connection[DictRow]] = self._turns.__dict__.setdefault("held", {})
        conn = held.get(stream_id) if stream_id is not None else None
        if conn is not None:
            with persistence_errors():  # as the pool's ``get_connection`` maps them
                yield conn
            return
        with self.datastore.get_connection() as conn:
            yield conn

    # -- events --------------------------------------------------------------------------------

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        """Store events, blobs and idempotency keys in one statement, its own transaction (no pipeline).

        Returns the events' notification ids, as eventsourcing's ``ApplicationRecorder`` does.
        """
        if not stored_events:
            return []
        if len(stored_events) == 1 and not kwargs.get("blobs") and not kwargs.get("idempotency"):
            return self._insert_one(stored_events[0])  # the common append (ADR 0052)
        blobs = blob_rows(kwargs)
        keys = idempotency_rows(kwargs)
        key_columns = [list(column) for column in zip(*keys, strict=True)] if keys else [[], [], [], []]
        # One statement, so its own transaction: no table lock (ADR 0031). The function takes the stream's
        # writer turn (ADR 0035), checks each stream's head, claims the transaction's id and notification
        # ids, then writes the events, blobs and idempotency keys. Within a writer turn it runs on the
        # connection holding the turn. Once it has committed, a NOTIFY of its own wakes live tails (inside
        # the append it would serialize every writer's commit, ADR 0042), sent by the notifier's thread
        # with those of other commits made meanwhile (ADR 0047).
        only = stored_events[0].originator_id
        one = all(s.originator_id == only for s in stored_events)
        params = (
            [str(s.originator_id) for s in stored_events],
            [s.originator_version for s in stored_events],
            [s.topic for s in stored_events],
            [s.state for s in stored_events],
            [sha for sha, _ in blobs],
            [text.encode("utf-8") for _, text in blobs],
            *key_columns,
        )
        append = partial(_append_on, statement=self._append, params=params)
        held: dict[str, psycopg.Connection[DictRow]] | None = self._turns.__dict__.get("held")
        return self._appended(held.get(str(only)) if held and one else None, append)

    def _insert_one(self, event: StoredEvent) -> list[int]:
        """``insert_events`` of one event without blobs or keys: the same statement, connection and errors.

        The general path's work for one row, without the parameter columns, the ``partial`` and the
        stream check it does not need (one event is one stream): ~5 µs of an append (ADR 0052).
        """
        stream_id = str(event.originator_id)
        held: dict[str, psycopg.Connection[DictRow]] | None = self._turns.__dict__.get("held")
        turn = held.get(stream_id) if held else None
        return self._appended(
            turn, self._append_one, stream_id, event.originator_version, event.topic, event.state
        )

    def _appended(
        self, turn: psycopg.Connection[DictRow] | None, run: Callable[..., list[int]], *args: Any
    ) -> list[int]:
        """``run(conn, *args)`` on the connection holding the writer turn, else a pooled one; then NOTIFY.

        psycopg's errors are mapped as ``get_connection`` maps them (a gap: ``IntegrityError``). The pool's
        ``getconn``/``putconn`` are used directly: ``get_connection``'s wrappers cost more than the rest here.
        """
        try:
            if turn is not None:
                ids = run(turn, *args)
            else:
                pool = self.datastore.pool
                if pool.closed:  # not opened yet: ``get_connection`` opens it
                    with self.datastore.get_connection() as conn:
                        ids = run(conn, *args)
                else:
                    conn = pool.getconn()
                    try:
                        ids = run(conn, *args)
                    finally:
                        pool.putconn(conn)
        except psycopg.Error as error:
            raise persistence_error(error) from error
        self.notifier.committed()
        return ids

    def _send_notify(self) -> bool:
        """One NOTIFY on the recorder's channel, a transaction of its own (the notifier's ``send``).

        Returns whether it was sent: a listener held its lock (``notify_statement``, ADR 0079).
        """
        with self.datastore.get_connection() as conn:
            return conn.execute(self._notify, prepare=True).fetchone() is not None

    def close(self) -> None:
        """Send the NOTIFY still due, before the pool closes (``open_postgres``'s ``on_close``)."""
        self.notifier.close()

    def insert_event_batches(self, batches: Iterable[tuple[Sequence[StoredEvent], Extras]]) -> None:
        """Stage each batch as it is drawn, then append them all in ONE statement (``postgres_import``).

        Every batch is stored, or none; the client holds one batch at a time. Listeners are woken once,
        after the append has committed (by the notifier, ADR 0047).
        """
        with self.datastore.get_connection() as conn:
            stored = stage_and_append(conn, self._function, batches)
        if stored:
            self.notifier.committed()

    def _heads_statement(self) -> Composed:
        """The last position of each stream in an array, each by an index-only backward scan.

        ``MAX(originator_version) ... WHERE originator_id = ANY(...) GROUP BY`` reads every row of the
        streams (a bitmap scan of the whole session); ``ORDER BY originator_version DESC LIMIT 1`` per
        stream reads one index entry, so an append costs the same at 40k events as at 1k.
        """
        return SQL(
            "SELECT s.id AS originator_id, h.v AS head FROM unnest(%s::text[]) AS s(id) "
            "CROSS JOIN LATERAL (SELECT originator_version AS v FROM {} e WHERE e.originator_id = s.id "
            "ORDER BY originator_version DESC LIMIT 1) AS h"
        ).format(self.events)

    @contextmanager
    def stream_lock(self, stream_id: str) -> Iterator[None]:
        """Hold a session-level advisory lock on one stream (released at exit, or when the process dies).

        PostgreSQL queues waiters for a lock in arrival order, so writers of one hot session take turns
        instead of losing optimistic-concurrency races again and again. The wait is bounded by the
        connection's ``lock_timeout``. The key is the stream id and schema hashed to 64 bits: streams of
        other sessions (or schemas) take other locks, so only writers of one session wait for each other.
        """
        key = stream_key(self.datastore.schema, stream_id)
        held: dict[str, psycopg.Connection[DictRow]] = self._turns.__dict__.setdefault("held", {})
        with self.datastore.get_connection() as conn:
            conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (key,))
            held[stream_id] = conn  # the turn's appends run here: the append function's lock is re-entrant
            try:
                yield
            finally:
                del held[stream_id]
                conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (key,))

    def select_events(
        self,
        originator_id: Any,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> Sequence[StoredEvent]:
        """Return a stream's events in ``(gt, lte]`` (one attempt: failures are not retried for seconds)."""
        statement = SQL("SELECT originator_version, topic, state FROM {} WHERE originator_id = %s").format(
            self.events
        )
        params: list[Any] = [str(originator_id)]
        if gt is not None:
            statement += SQL(" AND originator_version > %s")
            params.append(gt)
        if lte is not None:
            statement += SQL(" AND originator_version <= %s")
            params.append(lte)
        statement += SQL(" ORDER BY originator_version DESC" if desc else " ORDER BY originator_version")
        if limit is not None:
            statement += SQL(" LIMIT %s")
            params.append(limit)
        with self._connection(str(originator_id)) as conn, conn.cursor() as curs:
            curs.execute(statement, params, prepare=True)
            return [
                StoredEvent(
                    originator_id=str(originator_id),
                    originator_version=row["originator_version"],
                    topic=row["topic"],
                    state=bytes(row["state"]),
                )
                for row in curs.fetchall()
            ]

    # -- side tables ---------------------------------------------------------------------------

    def read_blob(self, sha256: str) -> str | None:
        """Return the text stored under ``sha256``, or None."""
        with self.datastore.get_connection() as conn, conn.cursor(binary=True) as curs:
            curs.execute(
                SQL("SELECT utf8 FROM {} WHERE sha256 = %s").format(self._table(self.blobs_table)), (sha256,)
            )
            row = curs.fetchone()
        return None if row is None else bytes(row["utf8"]).decode("utf-8")

    def lookup_idempotency(self, stream_id: str, key: str) -> tuple[int, int] | None:
        """Return the first and last positions stored under an idempotency key, or None."""
        with self.datastore.get_connection() as conn:
            row = conn.execute(
                SQL("SELECT first_position, last_position FROM {} WHERE stream_id = %s AND key = %s").format(
                    self._table(self.idempotency_table)
                ),
                (stream_id, key),
            ).fetchone()
        return None if row is None else (int(row["first_position"]), int(row["last_position"]))

    def load_token_counts(self, tokenizer: str, keys: Sequence[str]) -> dict[str, int]:
        """Return cached counts for the given content hashes."""
        with self.datastore.get_connection() as conn:
            rows = conn.execute(
                SQL("SELECT sha256, tokens FROM {} WHERE tokenizer = %s AND sha256 = ANY(%s)").format(
                    self._table(self.counts_table)
                ),
                (tokenizer, list(keys)),
            ).fetchall()
        return {str(row["sha256"]): int(row["tokens"]) for row in rows}

    def save_token_counts(self, tokenizer: str, counts: Mapping[str, int]) -> None:
        """Store counts for content hashes (existing ones are kept)."""
        with self.datastore.get_connection() as conn:
            conn.execute(
                SQL(
                    "INSERT INTO {} SELECT %s, * FROM unnest(%s::text[], %s::bigint[]) ON CONFLICT DO NOTHING"
                ).format(self._table(self.counts_table)),
                (tokenizer, list(counts), list(counts.values())),
            )

    def load_snapshot(self, name: str) -> tuple[int, bytes] | None:
        """Return a projection snapshot's position and bytes, or None."""
        with self.datastore.get_connection() as conn:
            row = conn.execute(
                SQL("SELECT position, state FROM {} WHERE name = %s").format(
                    self._table(self.snapshots_table)
                ),
                (name,),
            ).fetchone()
        return None if row is None else (int(row["position"]), bytes(row["state"]))

    def save_snapshot(self, name: str, position: int, state: bytes) -> None:
        """Store or replace a projection snapshot."""
        with self.datastore.get_connection() as conn:
            conn.execute(
                SQL(
                    "INSERT INTO {} VALUES (%s, %s, %b) ON CONFLICT (name) "
                    "DO UPDATE SET position = EXCLUDED.position, state = EXCLUDED.state"
                ).format(self._table(self.snapshots_table)),
                (name, position, state),
            )

    def session_starts(self, start: int, limit: int) -> Sequence[Notification]:
        """Up to ``limit`` session starts from notification id ``start``, in order (their partial index)."""
        with self.datastore.get_connection() as conn:
            return postgres_session_starts(conn, self.events, start, limit)

    def stream_versions(self, stream_ids: Iterable[str]) -> dict[str, int]:
        """Return the last position of each stream."""
        with self.datastore.get_connection() as conn:
            rows = conn.execute(self._heads_statement(), (list(stream_ids),)).fetchall()
        return {str(row["originator_id"]): int(row["head"]) for row in rows}


def _append_on(conn: psycopg.Connection[Any], *, statement: bytes, params: Sequence[Any]) -> list[int]:
    """Run the append statement on ``conn`` (autocommit: its own transaction); the notification ids."""
    with conn.cursor(row_factory=tuple_row) as curs:
        curs.execute(statement, params, prepare=True)
        row = curs.fetchone()
    return [] if row is None else [int(i) for i in row[0]]


def open_postgres(url: str) -> RecorderEventStore:
    """Open (creating or migrating the schema if needed) the PostgreSQL ledger the URL names."""
    kwargs, schema, options = connection_settings(url)
    where = f"{kwargs['host']}:{kwargs['port']}/{kwargs['dbname']}"
    datastore: PostgresDatastore | None = None
    try:
        # One direct connection first: a refused or unreachable server fails here at once, instead of
        # in a pool that retries in the background until its timeout.
        with psycopg.connect(**kwargs, autocommit=True) as probe:
            datastore = PostgresDatastore(
                kwargs["dbname"], kwargs["host"], kwargs["port"], kwargs["user"], kwargs["password"] or "",
                schema=schema, originator_id_type="text",
            )  # fmt: skip
            datastore.pool = ConnectionPool[psycopg.Connection[DictRow]](
                kwargs={**kwargs, "row_factory": dict_row},
                min_size=1,
                max_size=6,
                open=False,
                configure=_autocommit,
                timeout=options.pool_timeout,
                reconnect_timeout=options.pool_timeout,
                name=f"contextledger:{schema}",
            )
            # Opened (and waited for) once, here: concurrent first waits race inside psycopg_pool.
            datastore.pool.open(wait=True, timeout=options.pool_timeout)
            recorder = PostgresRecorder(
                datastore, events_table_name="contextledger_events", notify_interval=options.notify_interval
            )
            recorder.setup(probe)
        datastore.register_type_adapters()
    except (psycopg.Error, PersistenceError) as error:
        if datastore is not None:
            datastore.close()
        msg = f"cannot open PostgreSQL ledger at {where} (schema {schema}): {error}"
        raise StoreUnavailableError(msg) from error

    def close() -> None:
        recorder.close()
        datastore.close()

    return RecorderEventStore(recorder, url=url, on_close=close)
