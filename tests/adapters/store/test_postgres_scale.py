"""PostgreSQL at scale: an append reads its stream's head through the index, not the whole stream."""

from __future__ import annotations

import contextledger
import psycopg
from contextledger.adapters.store.event_store import RecorderEventStore
from contextledger.adapters.store.postgres import PostgresRecorder

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
