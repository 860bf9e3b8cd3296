"""PostgreSQL at scale: an append reads its stream's head through the index, not the whole stream."""

from __future__ import annotations

from pathlib import Path

import contextledger
import psycopg
import pytest
from contextledger.adapters.store.event_store import RecorderEventStore
from contextledger.adapters.store.postgres import PostgresRecorder

from tests.adapters.store.test_concurrent_writers import APPENDS, PROCESSES, messages, run_writers, start
from tests.conftest import PG_BASE


def _recorder(ledger: contextledger.Ledger) -> PostgresRecorder:
    store = ledger.ports.log
    assert isinstance(store, RecorderEventStore)
    assert isinstance(store.recorder, PostgresRecorder)
    return store.recorder


def test_the_head_read_is_an_index_scan_that_stops_at_one_row(pg_url: str) -> None:
    """The head read's plan is a Limit over the primary key index: no bitmap scan, no aggregate.

    Before, ``MAX ... GROUP BY`` read every row of the session, so an append slowed as the session grew.
    """
    with contextledger.open_ledger(pg_url) as ledger:
        session = ledger.start_session()
        for _ in range(3):
            ledger.append_many(session, [{"role": "user", "content": "x"}] * 1000)
        recorder = _recorder(ledger)
        with psycopg.connect(PG_BASE.split("?")[0], autocommit=True) as conn:
            schema = pg_url.partition("?schema=")[2]
            conn.execute(f'ANALYZE "{schema}".contextledger_events')
            statement = recorder._heads_statement().as_string(conn)
            plan = "\n".join(
                str(row[0]) for row in conn.execute("EXPLAIN " + statement, ([session, "nobody"],)).fetchall()
            )
    assert "Limit" in plan
    assert "contextledger_events_pkey" in plan
    assert "Bitmap" not in plan
    assert "Aggregate" not in plan


def test_heads_of_several_streams_and_appends_after_them(pg_url: str) -> None:
    """Each stream's head is its own last position; a stream never written has none; appends continue."""
    with contextledger.open_ledger(pg_url) as ledger:
        a = ledger.start_session()
        b = ledger.start_session()
        ledger.append_many(a, [{"role": "user", "content": "x"}] * 5)
        recorder = _recorder(ledger)
        assert recorder.stream_versions([a, b, "nobody"]) == {a: 6, b: 1}
        assert ledger.add_user_message(b, "y") == 2
        assert {s.session_id: s.events for s in ledger.sessions()} == {a: 6, b: 2}


def test_writers_of_one_hot_session_take_turns_instead_of_conflicting(pg_url: str, tmp_path: Path) -> None:
    """Four processes appending to ONE session with no retry at all: every append lands, none conflicts.

    The ledger reads the head and appends inside the session's writer turn (an advisory lock PostgreSQL
    queues in arrival order), so the README's retry recipe is no longer needed for ledger appends.
    """
    sessions = start(pg_url, 1)
    outcomes = run_writers(pg_url, sessions, retry=False, folder=tmp_path)
    assert [o["other"] for o in outcomes] == [[]] * PROCESSES
    assert sum(o["conflicts"] + o["locked"] + o["unavailable"] for o in outcomes) == 0
    assert sum(o["ok"] for o in outcomes) == PROCESSES * APPENDS
    stored = messages(pg_url, sessions[0])
    assert sorted(stored) == sorted(f"{w}-{n}" for w in range(PROCESSES) for n in range(APPENDS))


def test_a_writer_turn_is_per_session_and_released_on_error(pg_url: str) -> None:
    """Holding one session's turn does not block another session; a failed append releases its turn."""
    with contextledger.open_ledger(pg_url) as first, contextledger.open_ledger(pg_url) as second:
        a = first.start_session()
        b = first.start_session()
        with first.log.writer_turn(a):
            assert second.add_user_message(b, "other session") == 2  # not blocked
        with pytest.raises(contextledger.ConcurrencyConflictError):
            first.add_user_message(a, "stale", expected_version=0)
        assert second.add_user_message(a, "after the failed append") == 2  # its turn was released
