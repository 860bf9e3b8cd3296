"""A streamed import on PostgreSQL: batches staged in session-private temporary tables, then ONE append.

The append function must claim the transaction's id before any other write of its transaction (ADR 31),
so a file's events cannot be inserted batch by batch inside the one transaction that makes them all or
nothing. Instead each batch, as it is drawn, is copied (``COPY ... FROM STDIN``, binary) into temporary
tables of the connection the import holds; no lock is taken and nothing of the log is written. Then one
statement hands the staged rows to the append function as arrays built on the server: the heads check,
the claim and the inserts run as for any append, in one transaction, and the staged rows are dropped.
The client holds one batch at a time (ADR 41's goal: peak memory bounded by the file, not a multiple).

Temporary tables are private to the connection and vanish with it: a process killed mid-import leaves
nothing behind, in the log or elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import psycopg
from contextledger.adapters.store.batch import Extras, blob_rows, idempotency_rows
from eventsourcing.persistence import StoredEvent
from psycopg.sql import SQL, Composed

__all__ = ["stage_and_append"]

_EVENTS = "pg_temp.contextledger_import_events"
_BLOBS = "pg_temp.contextledger_import_blobs"
_KEYS = "pg_temp.contextledger_import_keys"

_CREATE = (  # temporary tables live in the connection's own pg_temp schema
    (
        "CREATE TEMP TABLE IF NOT EXISTS contextledger_import_events (n bigint PRIMARY KEY, "
        "i text NOT NULL, v bigint NOT NULL, t text NOT NULL, s bytea NOT NULL)"
    ),
    "CREATE TEMP TABLE IF NOT EXISTS contextledger_import_blobs (sha text PRIMARY KEY, utf8 bytea NOT NULL)",
    (
        "CREATE TEMP TABLE IF NOT EXISTS contextledger_import_keys (n bigint PRIMARY KEY, "
        "stream text NOT NULL, key text NOT NULL, first bigint NOT NULL, last bigint NOT NULL)"
    ),
)
_DROP = f"DROP TABLE IF EXISTS {_EVENTS}, {_BLOBS}, {_KEYS}"


def _append_staged(function: Composed) -> Composed:
    """The append function called once with every staged row, as arrays built on the server."""
    return SQL(
        f"SELECT {{}}(ARRAY(SELECT i FROM {_EVENTS} ORDER BY n), ARRAY(SELECT v FROM {_EVENTS} ORDER BY n), "  # noqa: S608
        f"ARRAY(SELECT t FROM {_EVENTS} ORDER BY n), ARRAY(SELECT s FROM {_EVENTS} ORDER BY n), "
        f"ARRAY(SELECT sha FROM {_BLOBS} ORDER BY sha), ARRAY(SELECT utf8 FROM {_BLOBS} ORDER BY sha), "
        f"ARRAY(SELECT stream FROM {_KEYS} ORDER BY n), ARRAY(SELECT key FROM {_KEYS} ORDER BY n), "
        f"ARRAY(SELECT first FROM {_KEYS} ORDER BY n), ARRAY(SELECT last FROM {_KEYS} ORDER BY n)) AS ids"
    ).format(function)


def _stage(
    cursor: psycopg.Cursor[Any], stored: Sequence[StoredEvent], extras: Extras, counts: list[int]
) -> None:
    """Copy one batch into the temporary tables (``counts``: events and keys staged so far)."""
    with cursor.copy(f"COPY {_EVENTS} (n, i, v, t, s) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(["int8", "text", "int8", "text", "bytea"])
        for event in stored:
            counts[0] += 1
            copy.write_row(
                (counts[0], str(event.originator_id), event.originator_version, event.topic, event.state)
            )
    blobs = blob_rows(extras)
    if blobs:  # content-addressed: a text met twice in the file is staged once
        cursor.execute(
            f"INSERT INTO {_BLOBS} SELECT * FROM unnest(%s::text[], %b::bytea[]) ON CONFLICT DO NOTHING",  # noqa: S608
            ([sha for sha, _ in blobs], [text.encode("utf-8") for _, text in blobs]),
        )
    for stream, key, first, last in idempotency_rows(extras):
        counts[1] += 1
        cursor.execute(
            f"INSERT INTO {_KEYS} VALUES (%s, %s, %s, %s, %s)",  # noqa: S608
            (counts[1], stream, key, first, last),
        )


def stage_and_append(
    conn: psycopg.Connection[Any], function: Composed, batches: Iterable[tuple[Sequence[StoredEvent], Extras]]
) -> bool:
    """Stage every batch as it is drawn, then append them all in one statement; return whether any was.

    ``conn`` is in autocommit mode: each staging statement commits to the private tables at once (no
    transaction stays open while the next batch is drawn), and the final append is its own transaction.
    An error while drawing, staging or appending leaves the log as it was; the tables are dropped either way.
    """
    with conn.cursor() as cursor:
        try:
            for statement in _CREATE:
                cursor.execute(statement)
            cursor.execute(f"TRUNCATE {_EVENTS}, {_BLOBS}, {_KEYS}")
            counts = [0, 0]
            for stored, extras in batches:
                if stored:
                    _stage(cursor, stored, extras, counts)
            if counts[0]:
                cursor.execute(_append_staged(function))
            return counts[0] > 0
        finally:
            if not conn.closed and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
                cursor.execute(_DROP)
