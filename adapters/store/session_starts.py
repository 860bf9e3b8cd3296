"""Session starts, the one topic the store looks events up by: their rows alone are indexed (ADR 0077).

Listing sessions (``RecorderEventStore.sessions``) reads the events that start sessions, in store order.
An index on every event's topic served that read, and every append paid for it: a B-tree entry per
event that nothing else read (0.6-0.7 µs of a batched SQLite append's ~7 µs an event, a sixth of the
server's work of a PostgreSQL append). A partial index holds the session starts only: the listing still
reads no other row, and an append of any other event writes no index entry for its topic.

Opening a ledger whose events table still has the index of every topic drops it and builds the partial one
(SQLite checks at every open; PostgreSQL migrates once, to schema 8: ``postgres_schema``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

from contextledger.domain.events import SessionStarted, topic_of
from eventsourcing.persistence import Notification

__all__ = ["STARTED_TOPIC", "sqlite_session_starts", "sqlite_statements"]

STARTED_TOPIC = topic_of(SessionStarted)
"""The topic of the events that start sessions (the only rows the events table indexes by topic)."""

_SQLITE_TOPIC = "'" + STARTED_TOPIC.replace("'", "''") + "'"
"""``STARTED_TOPIC`` as an SQL literal: a partial index serves a query whose WHERE names its very constant."""


def sqlite_statements(table: str) -> list[str]:
    """Drop the index of every topic (created before ADR 0077), create the partial index of session starts."""
    return [
        f"DROP INDEX IF EXISTS {table}_topic_idx",
        f"CREATE INDEX IF NOT EXISTS {table}_started_idx ON {table} (topic) WHERE topic = {_SQLITE_TOPIC}",
    ]


def sqlite_session_starts(
    cursor: Any, table: str, convert: Callable[[str], UUID | str], start: int, limit: int
) -> list[Notification]:
    """Up to ``limit`` session starts from notification id ``start``, in order, through the partial index."""
    cursor.execute(
        f"SELECT rowid, originator_id, originator_version, topic, state FROM {table} "  # noqa: S608 - the recorder's table
        f"WHERE topic = {_SQLITE_TOPIC} AND rowid >= ? ORDER BY rowid LIMIT ?",
        (start, limit),
    )
    return [
        Notification(
            id=row[0], originator_id=convert(row[1]), originator_version=row[2], topic=row[3], state=row[4]
        )
        for row in cursor.fetchall()
    ]
