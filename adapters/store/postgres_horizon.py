"""Concurrent writers on PostgreSQL, readers that never skip: claimed ids and a transaction-id horizon.

eventsourcing keeps notification ids in commit order by locking the events table in EXCLUSIVE mode
for every insert, so all writers of all sessions commit one at a time. Here writers commit
concurrently (ADR 0031):

- **Claim.** A writing transaction's first write is its claim, inside the append function: under a
  session-level advisory lock held for microseconds (not until commit), it assigns the transaction
  its id (``pg_current_xact_id()``) and takes its notification ids from the sequence. Claims are
  serialized, so a transaction whose ids are lower also has the lower transaction id. Each row keeps
  its transaction's id in ``tx_id``. The append function runs the heads check, the claim and the
  inserts as one statement (its own transaction, one round trip); the writer's NOTIFY follows the
  commit as a transaction of its own (``notify_statement``).
- **Horizon.** A reader takes only rows with ``tx_id < pg_snapshot_xmin(pg_current_snapshot())``:
  every transaction below the snapshot's xmin has ended, and (by the claim order) so has every
  transaction holding a lower notification id. The rows a reader returns are therefore a prefix of
  the final log: an id it passes over is a transaction that rolled back, never one still to commit.
  Rows committed above the horizon are returned by a later read, in id order.
- **Read your writes.** A read that meets committed rows above the horizon waits (bounded by
  ``HORIZON_WAIT``) until the transactions still running below them end, then returns what is safe;
  after the bound it returns the safe prefix alone (late, never out of order).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from itertools import takewhile
from typing import Any

import psycopg
from contextledger.adapters.store.session_starts import STARTED_TOPIC
from eventsourcing.persistence import (
    DatabaseError,
    DataError,
    IntegrityError,
    InterfaceError,
    InternalError,
    Notification,
    NotSupportedError,
    OperationalError,
    PersistenceError,
    ProgrammingError,
)
from eventsourcing.postgres import PostgresDatastore
from psycopg.sql import SQL, Composable, Composed, Identifier, Literal

__all__ = [
    "HORIZON_WAIT",
    "PostgresNotificationLog",
    "append_statement",
    "horizon_statements",
    "listen_statements",
    "listeners_key",
    "notify_statement",
    "persistence_error",
    "persistence_errors",
    "postgres_session_starts",
    "stream_key",
]

HORIZON_WAIT = 30.0
"""Seconds a read waits for running transactions below rows already committed (then returns the prefix).

The horizon is the whole server's: a long write elsewhere (another schema or database, a 50 MB blob)
holds it back. Long enough that a process reads its own committed writes back through such a write;
bounded, so a reader stuck behind an hours-long transaction still returns (the safe prefix, late)."""

_ERRORS: tuple[tuple[type[psycopg.Error], type[PersistenceError]], ...] = (
    (psycopg.InterfaceError, InterfaceError),
    (psycopg.OperationalError, OperationalError),
    (psycopg.DataError, DataError),
    (psycopg.IntegrityError, IntegrityError),
    (psycopg.InternalError, InternalError),
    (psycopg.ProgrammingError, ProgrammingError),
    (psycopg.NotSupportedError, NotSupportedError),
    (psycopg.DatabaseError, DatabaseError),
    (psycopg.Error, PersistenceError),
)
"""psycopg's errors and eventsourcing's, in the order ``PostgresDatastore.get_connection`` maps them."""


def persistence_error(error: psycopg.Error) -> PersistenceError:
    """Psycopg's ``error`` as eventsourcing's, as ``PostgresDatastore.get_connection`` maps it."""
    return next(ours for theirs, ours in _ERRORS if isinstance(error, theirs))(str(error))


@contextmanager
def persistence_errors() -> Iterator[None]:
    """Raise psycopg's errors as eventsourcing's, as ``PostgresDatastore.get_connection`` does."""
    try:
        yield
    except psycopg.Error as error:
        raise persistence_error(error) from error


_SAFE = SQL("tx_id < pg_snapshot_xmin(pg_current_snapshot())")


def _function(schema: str, name: str) -> Composed:
    return SQL("{}.{}").format(Identifier(schema), Identifier(name))


def stream_key(schema: str, stream_id: str) -> str:
    """The advisory-lock key of one stream's writer turn (hashed with ``hashtextextended(key, 0)``)."""
    return f"contextledger:{schema}:{stream_id}"


def _append_body(schema: str, table: str, blobs: str, keys: str) -> str:
    """One append in one statement: the writer turn, the heads check, the claim, the events, blobs, keys.

    An append to one stream first takes that stream's writer turn as a transaction-level advisory lock
    (the key of ``stream_key``): it waits for a writer holding the turn (``PostgresRecorder.stream_lock``,
    which appends through the very connection holding it, so its own append does not wait), and the heads
    check that follows sees every append committed before. Appends to several streams at once (starting
    sessions) take no turn: the check and the primary key still refuse any overlap.
    """

    def name(table_name: str) -> str:
        return SQL("{}.{}").format(Identifier(schema), Identifier(table_name)).as_string()

    events = name(table)
    lock = f"hashtextextended({Literal(claim_key(schema, table)).as_string()}, 0)"
    sequence = Literal(
        f"{Identifier(schema).as_string()}.{Identifier(f'{table}_notification_id_seq').as_string()}"
    )
    seq = f"{sequence.as_string()}::regclass"
    # Simple expressions (``x := ...``, ``IF ...``) take PL/pgSQL's fast path; a statement with a subquery
    # or PERFORM starts an executor. The one-event append uses the simple forms only where it can.
    return (
        "DECLARE claimed bigint[]; head bigint; first bigint; bad text; tx xid8; done boolean; "  # noqa: S608
        "BEGIN "
        "IF ids[1] = ALL(ids) THEN "  # one stream (the common append): its turn, then its head
        f"PERFORM pg_advisory_xact_lock(hashtextextended({Literal(stream_key(schema, '')).as_string()} "
        "|| ids[1], 0)); "
        "IF cardinality(versions) = 1 THEN first := versions[1]; "
        "ELSE first := (SELECT min(v) FROM unnest(versions) v); END IF; "
        f"SELECT e.originator_version INTO head FROM {events} e WHERE e.originator_id = ids[1] "
        "ORDER BY e.originator_version DESC LIMIT 1; "
        "head := coalesce(head, 0); "
        "IF head <> first - 1 THEN bad := ids[1]; END IF; "
        "ELSE "
        "SELECT f.id, coalesce(h.v, 0), f.first INTO bad, head, first "
        "FROM (SELECT s.id, min(s.v) AS first FROM unnest(ids, versions) AS s(id, v) GROUP BY s.id) f "
        f"LEFT JOIN LATERAL (SELECT e.originator_version AS v FROM {events} e WHERE e.originator_id = f.id "
        "ORDER BY e.originator_version DESC LIMIT 1) h ON true "
        "WHERE coalesce(h.v, 0) <> f.first - 1 LIMIT 1; "
        "END IF; "
        "IF bad IS NOT NULL THEN RAISE EXCEPTION USING ERRCODE = 'unique_violation', MESSAGE = format("
        "'stream %L is at position %s: an append at %s would leave a gap', bad, head, first); "
        "END IF; "
        # The claim (see the module's docstring): under a lock held for microseconds, the transaction's id
        # and then its notification ids; the lock is released on any error or cancel too.
        "IF pg_current_xact_id_if_assigned() IS NOT NULL THEN "
        "RAISE EXCEPTION 'contextledger: notification ids are claimed before any other write'; "
        "END IF; "
        "BEGIN "
        f"PERFORM pg_advisory_lock({lock}); "
        "tx := pg_current_xact_id(); "
        f"IF cardinality(ids) = 1 THEN claimed := ARRAY[nextval({seq})]; "
        f"ELSE claimed := ARRAY(SELECT nextval({seq}) FROM generate_series(1, cardinality(ids))); END IF; "
        f"done := pg_advisory_unlock({lock}); "
        "EXCEPTION WHEN OTHERS OR query_canceled THEN "
        f"PERFORM pg_advisory_unlock({lock}); "
        "RAISE; "
        "END; "
        "IF cardinality(ids) = 1 THEN "
        f"INSERT INTO {events} (originator_id, originator_version, topic, state, notification_id, tx_id) "
        "VALUES (ids[1], versions[1], topics[1], states[1], claimed[1], tx); "
        "ELSE "
        f"INSERT INTO {events} (originator_id, originator_version, topic, state, notification_id, tx_id) "
        "SELECT u.i, u.v, u.t, u.s, u.n, tx "
        "FROM unnest(ids, versions, topics, states, claimed) AS u(i, v, t, s, n); "
        "END IF; "
        "IF cardinality(shas) > 0 THEN "
        f"INSERT INTO {name(blobs)} (sha256, utf8) SELECT * FROM unnest(shas, texts) ON CONFLICT DO NOTHING; "
        "END IF; "
        "IF cardinality(key_streams) > 0 THEN "
        f"INSERT INTO {name(keys)} SELECT * FROM unnest(key_streams, key_names, key_firsts, key_lasts); "
        "END IF; "
        "RETURN claimed; "
        "END"
    )


def claim_key(schema: str, table: str) -> str:
    """The advisory-lock key under which appends claim their transaction and notification ids."""
    return f"contextledger-claim:{schema}.{table}"


def horizon_statements(schema: str, table: str, *, blobs: str, keys: str) -> list[Composed]:
    """The ``tx_id`` column (0 for rows written before it existed) and the append function."""
    events = SQL("{}.{}").format(Identifier(schema), Identifier(table))
    return [
        SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS tx_id xid8 NOT NULL DEFAULT '0'").format(events),
        SQL("ALTER TABLE {} ALTER COLUMN tx_id DROP DEFAULT").format(events),
        SQL(
            "CREATE OR REPLACE FUNCTION {}(ids text[], versions bigint[], topics text[], states bytea[], "
            "shas text[], texts bytea[], key_streams text[], key_names text[], key_firsts bigint[], "
            "key_lasts bigint[]) RETURNS bigint[] LANGUAGE plpgsql AS {}"
        ).format(_function(schema, f"{table}_append"), Literal(_append_body(schema, table, blobs, keys))),
        # Schemas 5 and 6 claimed in a function of its own, now inlined in the append (ADR 0042).
        SQL("DROP FUNCTION IF EXISTS {}(integer)").format(_function(schema, f"{table}_claim")),
    ]


def append_statement(schema: str, table: str, *, one: bool = False) -> Composed:
    """``SELECT ids``: one append (see ``_append_body``) as the one statement of its transaction.

    ``one``: the statement of the common append, one event without blobs or an idempotency key, whose four
    values are sent as scalars (the client dumps no arrays).
    """
    arguments = (
        "ARRAY[%s]::text[], ARRAY[%s]::bigint[], ARRAY[%s]::text[], ARRAY[%b]::bytea[], '{{}}', '{{}}', "
        "'{{}}', '{{}}', '{{}}', '{{}}'"
        if one
        else "%s::text[], %s::bigint[], %s::text[], %b::bytea[], %s::text[], %b::bytea[], "
        "%s::text[], %s::text[], %s::bigint[], %s::bigint[]"
    )
    return SQL("SELECT {}(" + arguments + ") AS ids").format(_function(schema, f"{table}_append"))


def listeners_key(channel: str) -> str:
    """The advisory-lock key every listener on ``channel`` holds shared while it listens (ADR 0079)."""
    return f"contextledger-listeners:{channel}"


def listen_statements(channel: str) -> list[Composed]:
    """``LISTEN channel``, then the session's shared lock on ``listeners_key`` that tells writers it listens.

    Run on an autocommit connection kept for listening: the lock lives as long as the session (the server
    releases it when the connection closes or its client dies), so a writer never NOTIFYs for a listener
    that is gone, and always does for one that took the lock before the writer looked (``notify_statement``).
    """
    return [
        SQL("LISTEN {}").format(Identifier(channel)),
        SQL("SELECT pg_advisory_lock_shared(hashtextextended({}, 0))").format(
            Literal(listeners_key(channel))
        ),
    ]


def notify_statement(channel: str) -> bytes:
    """``SELECT pg_notify(channel, '')`` when a listener holds its lock, sent after an append has committed.

    A transaction that NOTIFYs holds a cluster-wide lock from its pre-commit until its end, so appends that
    notified inside their own transaction committed one at a time, each with its WAL flush: no group
    commit (ADR 0042). A transaction without a transaction id writes no commit record: this one holds the
    lock for microseconds. Listeners are woken after the rows are visible, as before.

    With no listener, no NOTIFY (ADR 0079): the statement first tries the exclusive transaction lock on
    ``listeners_key``, which it gets only when no listener holds the key shared (``listen_statements``),
    and releases at once (its transaction ends with the statement). The try runs after the append has
    committed: a listener that took its lock before it is woken; one that takes it after reads the rows
    when it next looks, since they were committed before. Two writers trying at once may both NOTIFY.
    The statement returns a row when it notified, none when no listener held the key: the writer then
    stays quiet for a moment (``postgres_notify.QUIET``), and a listener that starts meanwhile looks by
    itself until writers know it (``postgres_notify.UNHEARD``).
    """
    return (
        SQL("SELECT pg_notify({}, '') WHERE NOT pg_try_advisory_xact_lock(hashtextextended({}, 0))")
        .format(Literal(channel), Literal(listeners_key(channel)))
        .as_bytes(None)
    )


def _notification_of(row: Mapping[str, Any]) -> Notification:
    """A notification from a row of the events table read as a dict (``notification_id``, stream, ...)."""
    return Notification(
        id=row["notification_id"],
        originator_id=row["originator_id"],
        originator_version=row["originator_version"],
        topic=row["topic"],
        state=bytes(row["state"]),
    )


def postgres_session_starts(
    conn: psycopg.Connection[Any], events: Composable, start: int, limit: int
) -> Sequence[Notification]:
    """Up to ``limit`` session starts from notification id ``start``, in order, through the partial index.

    Committed rows only, as any read sees them; a session start of a transaction still in flight is listed
    once it commits (the notification log's horizon is for followers, which must never skip one).
    """
    statement = SQL(
        "SELECT notification_id, originator_id, originator_version, topic, state FROM {} "
        "WHERE topic = {} AND notification_id >= %s ORDER BY notification_id LIMIT %s"
    ).format(events, Literal(STARTED_TOPIC))
    with conn.cursor() as cursor:
        rows = cursor.execute(statement, (start, limit)).fetchall()
    return [_notification_of(row) for row in rows]


class PostgresNotificationLog:
    """The notification reads of ``PostgresRecorder``: only rows below the horizon, in id order."""

    datastore: PostgresDatastore
    events: Composable

    def select_notifications(
        self,
        start: int | None,
        limit: int,
        stop: int | None = None,
        topics: Sequence[str] = (),
        *,
        inclusive_of_start: bool = True,
    ) -> Sequence[Notification]:
        """Return up to ``limit`` events in notification order from ``start``, none above the horizon."""
        conditions: list[Composable] = []
        params: list[Any] = []
        if start is not None:
            conditions.append(SQL("notification_id >= %s" if inclusive_of_start else "notification_id > %s"))
            params.append(start)
        if stop is not None:
            conditions.append(SQL("notification_id <= %s"))
            params.append(stop)
        if topics:
            conditions.append(SQL("topic = ANY(%s)"))
            params.append(list(topics))
        where = SQL(" WHERE ") + SQL(" AND ").join(conditions) if conditions else SQL("")
        statement = SQL(
            "SELECT notification_id, originator_id, originator_version, topic, state, {} AS safe "
            "FROM {}{} ORDER BY notification_id LIMIT %s"
        ).format(_SAFE, self.events, where)
        params.append(limit)
        deadline = time.monotonic() + HORIZON_WAIT
        pause = 0.002
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            waited_for: int | None = None
            while True:
                curs.execute(statement, params, prepare=True)
                rows = curs.fetchall()
                prefix = list(takewhile(lambda row: bool(row["safe"]), rows))  # claims are ordered
                if waited_for is None:
                    waited_for = max((int(r["notification_id"]) for r in rows), default=0)
                covered = int(prefix[-1]["notification_id"]) if prefix else 0
                if len(prefix) == len(rows) or covered >= waited_for or time.monotonic() >= deadline:
                    break
                time.sleep(pause)
                pause = min(pause * 2, 0.05)
        return [_notification_of(row) for row in prefix]

    @property
    def newest_statement(self) -> Composed:
        """``SELECT safe, raw``: the newest id below the horizon and the newest committed id."""
        return SQL(
            "SELECT (SELECT notification_id FROM {0} WHERE {1} "
            "ORDER BY notification_id DESC LIMIT 1) AS safe, "
            "(SELECT max(notification_id) FROM {0}) AS raw"
        ).format(self.events, _SAFE)

    def max_notification_id(self) -> int | None:
        """The newest notification id below the horizon (waiting, bounded, for rows already committed)."""
        deadline = time.monotonic() + HORIZON_WAIT
        pause = 0.002
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            first_raw: int | None = None
            while True:
                curs.execute(self.newest_statement, prepare=True)
                row = curs.fetchone()
                safe = None if row is None or row["safe"] is None else int(row["safe"])
                raw = None if row is None or row["raw"] is None else int(row["raw"])
                if first_raw is None:
                    first_raw = raw or 0
                if (safe or 0) >= first_raw or time.monotonic() >= deadline:
                    return safe
                time.sleep(pause)
                pause = min(pause * 2, 0.05)
