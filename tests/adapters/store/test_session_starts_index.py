"""ADR 0077: the events table indexes session starts alone; ledgers with the index of every topic migrate."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import contextledger
import psycopg
from contextledger.adapters.store.event_store import RecorderEventStore
from contextledger.adapters.store.postgres_schema import SCHEMA_VERSION
from contextledger.adapters.store.session_starts import STARTED_TOPIC, sqlite_session_starts

from tests.conftest import PG_BASE

SQLITE_OLD_INDEX = "CREATE INDEX ledger_events_topic_idx ON ledger_events (topic)"


def _store(ledger: contextledger.Ledger) -> RecorderEventStore:
    store = ledger.ports.log
    assert isinstance(store, RecorderEventStore)
    return store


def _sessions_with_other_events(ledger: contextledger.Ledger, count: int) -> list[str]:
    sessions = []
    for n in range(count):
        session_id = ledger.start_session(session_id=f"s{n}")
        ledger.add_user_message(session_id, f"message {n}")
        sessions.append(session_id)
    return sessions


def test_session_starts_are_read_page_by_page_in_store_order_and_nothing_else(any_url: str) -> None:
    """Every backend's recorder returns the session starts only, in notification order, a page at a time."""
    with contextledger.open_ledger(any_url) as ledger:
        sessions = _sessions_with_other_events(ledger, 5)
        store = _store(ledger)
        first = store.extras.session_starts(1, 2)
        rest = store.extras.session_starts(first[-1].id + 1, 10)
        assert [n.originator_id for n in [*first, *rest]] == sessions
        assert {n.topic for n in [*first, *rest]} == {STARTED_TOPIC}
        assert [n.id for n in [*first, *rest]] == sorted(n.id for n in [*first, *rest])
        assert [s.session_id for s in ledger.sessions()] == sessions


def _sqlite_indexes(path: Path) -> dict[str, str | None]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'ledger_events'"
        )
        return {str(name): sql for name, sql in rows}


def test_a_new_sqlite_ledger_indexes_session_starts_only(tmp_path: Path) -> None:
    """No index of every event's topic: the one index by topic is partial, over the session starts."""
    path = tmp_path / "ledger.db"
    with contextledger.open_ledger(f"sqlite:///{path}") as ledger:
        ledger.start_session()
    indexes = _sqlite_indexes(path)
    assert "ledger_events_topic_idx" not in indexes
    assert f"WHERE topic = '{STARTED_TOPIC}'" in str(indexes["ledger_events_started_idx"])


class _Recording:
    """A cursor that keeps each statement it runs (and runs it on a real connection)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.ran: list[tuple[str, Any]] = []
        self._rows: list[Any] = []

    def execute(self, sql: str, params: Any) -> None:
        self.ran.append((sql, params))
        self._rows = self.conn.execute(sql, params).fetchall()

    def fetchall(self) -> list[Any]:
        return self._rows


def test_the_sqlite_listing_reads_through_the_partial_index(tmp_path: Path) -> None:
    """The statement the recorder runs is planned as a search of the session-start index, not a scan."""
    path = tmp_path / "ledger.db"
    with contextledger.open_ledger(f"sqlite:///{path}") as ledger:
        sessions = _sessions_with_other_events(ledger, 3)
    with sqlite3.connect(path) as conn:
        cursor = _Recording(conn)
        found = sqlite_session_starts(cursor, "ledger_events", str, 1, 10)
        ((sql, params),) = cursor.ran
        plan = " ".join(str(row[-1]) for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params))
    assert [n.originator_id for n in found] == sessions
    assert "USING INDEX ledger_events_started_idx" in plan
    assert "SCAN" not in plan


def test_a_sqlite_ledger_with_the_index_of_every_topic_loses_it_on_open(tmp_path: Path) -> None:
    """A ledger written before ADR 0077 is migrated when opened: same sessions, the partial index instead."""
    path = tmp_path / "ledger.db"
    with contextledger.open_ledger(f"sqlite:///{path}") as ledger:
        sessions = _sessions_with_other_events(ledger, 3)
    with sqlite3.connect(path) as conn:
        conn.execute("DROP INDEX ledger_events_started_idx")
        conn.execute(SQLITE_OLD_INDEX)
    assert "ledger_events_topic_idx" in _sqlite_indexes(path)
    with contextledger.open_ledger(f"sqlite:///{path}") as ledger:
        assert [s.session_id for s in ledger.sessions()] == sessions
        ledger.add_user_message(sessions[0], "after")
    indexes = _sqlite_indexes(path)
    assert "ledger_events_topic_idx" not in indexes
    assert "ledger_events_started_idx" in indexes


def _pg_indexes(conn: psycopg.Connection[Any], schema: str) -> dict[str, str]:
    rows = conn.execute(
        "SELECT indexname, indexdef FROM pg_indexes "
        "WHERE schemaname = %s AND tablename = 'contextledger_events'",
        (schema,),
    ).fetchall()
    return {str(name): str(definition) for name, definition in rows}


def test_a_schema_7_postgres_ledger_migrates_to_the_partial_index(pg_url: str) -> None:
    """Schema 7 (an index of every topic) becomes 8 on open; the listing reads the partial index."""
    schema = pg_url.partition("?schema=")[2]
    with contextledger.open_ledger(pg_url) as ledger:
        sessions = _sessions_with_other_events(ledger, 3)
    with psycopg.connect(PG_BASE.split("?")[0], autocommit=True) as conn:
        conn.execute(f'DROP INDEX "{schema}".contextledger_events_started_idx')
        conn.execute(
            f'CREATE INDEX contextledger_events_topic_idx ON "{schema}".contextledger_events (topic)'
        )
        conn.execute(f"UPDATE \"{schema}\".contextledger_meta SET value = 7 WHERE key = 'schema'")
    with contextledger.open_ledger(pg_url) as ledger:
        assert [s.session_id for s in ledger.sessions()] == sessions
        ledger.add_user_message(sessions[0], "after")
    with psycopg.connect(PG_BASE.split("?")[0], autocommit=True) as conn:
        indexes = _pg_indexes(conn, schema)
        version = conn.execute(
            f"SELECT value FROM \"{schema}\".contextledger_meta WHERE key = 'schema'"
        ).fetchone()
        conn.execute(f'SET search_path = "{schema}"')
        conn.execute("SET enable_seqscan = off")  # three rows: the plan says if the index can serve
        plan = conn.execute(
            "EXPLAIN SELECT notification_id FROM contextledger_events "
            f"WHERE topic = '{STARTED_TOPIC}' AND notification_id >= 1 ORDER BY notification_id LIMIT 10"
        ).fetchall()
    assert version == (SCHEMA_VERSION,) == (8,)
    assert "contextledger_events_topic_idx" not in indexes
    assert f"WHERE (topic = '{STARTED_TOPIC}'::text)" in indexes["contextledger_events_started_idx"]
    assert "contextledger_events_started_idx" in " ".join(str(row[0]) for row in plan)
