"""PostgreSQL: the append function takes the session's writer turn itself (ADR 0035).

A ledger whose cached state is current appends in one statement, with no lock round trips and no read;
the function waits for a writer holding the session's turn, so that writer never loses its append.
"""

from __future__ import annotations

import threading
import time

import contextledger
import pytest
from contextledger.adapters.store.event_store import RecorderEventStore
from eventsourcing.persistence import IntegrityError, StoredEvent


def test_an_append_waits_for_the_writer_holding_the_turn_and_then_lands_after_it(pg_url: str) -> None:
    """While one ledger holds a session's turn and appends in it, another's append waits, then follows.

    The holder's own append runs on the connection holding the turn (no wait on itself); the other
    ledger's cached state is behind once the holder appended, so it re-reads in the turn and lands next.
    Before, the second ledger's append took no turn and the holder's append failed with a conflict.
    """
    with contextledger.open_ledger(pg_url) as first, contextledger.open_ledger(pg_url) as second:
        session = first.start_session()
        assert second.add_user_message(session, "second, before") == 2  # caches the state in `second`
        assert first.add_user_message(session, "first, before") == 3
        landed: list[int] = []
        with first.log.writer_turn(session):
            other = threading.Thread(target=lambda: landed.append(second.add_user_message(session, "waited")))
            other.start()
            time.sleep(0.3)
            assert landed == []  # waiting for the turn
            assert first.add_user_message(session, "holder") == 4  # never a conflict inside the turn
        other.join(timeout=30)
        assert landed == [5]
        texts = [getattr(getattr(r.event, "content", None), "text", None) for r in first.events(session)]
        assert texts == [None, "second, before", "first, before", "holder", "waited"]


def test_a_cached_writer_appends_with_one_statement_and_a_stale_one_still_lands(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ledger whose cache is current neither takes the turn nor reads; behind, it catches up in the turn.

    A stale cache is a conflict the store detects: nothing is written, the ledger re-reads in the turn
    and appends after the other writer's events (including a tool result for a call it had not seen).
    """
    with contextledger.open_ledger(pg_url) as first, contextledger.open_ledger(pg_url) as second:
        session = first.start_session()
        first.add_user_message(session, "warm")
        store = first.ports.log
        assert isinstance(store, RecorderEventStore)
        calls: list[str] = []
        turn, select = store.writer_turn, store.recorder.select_events
        monkeypatch.setattr(store, "writer_turn", lambda s: calls.append("turn") or turn(s))
        monkeypatch.setattr(
            store.recorder, "select_events", lambda *a, **k: calls.append("read") or select(*a, **k)
        )
        for n in range(5):
            first.add_user_message(session, f"m{n}")
        assert calls == []
        second.add_assistant_message(session, tool_calls=[{"id": "c1", "name": "f", "arguments": {}}])
        assert first.add_tool_result(session, "c1", "done") == 9  # `first` had not seen the call
        assert calls[:2] == ["turn", "read"]
        assert first.version(session) == second.version(session) == 9


def test_the_one_event_statement_stores_what_the_array_statement_stores(pg_url: str) -> None:
    """One event without blobs or key (four scalars) is stored as the general statement stores it.

    Both streams get the same events, one at a time (the scalar statement) and through the array
    statement (a blob makes ``insert_events`` take it); rows match, and a gap is refused alike.
    """
    with contextledger.open_ledger(pg_url) as ledger:
        store = ledger.ports.log
        assert isinstance(store, RecorderEventStore)
        recorder = store.recorder
        events = [StoredEvent("a", v, "t", bytes([v, 0, 255])) for v in (1, 2)]
        for event in events:
            assert len(recorder.insert_events([event])) == 1
        twins = [StoredEvent("b", e.originator_version, e.topic, e.state) for e in events]
        assert len(recorder.insert_events(twins, blobs={"sha": "text"})) == 2
        assert [(e.originator_version, e.topic, e.state) for e in recorder.select_events("a")] == [
            (e.originator_version, e.topic, e.state) for e in recorder.select_events("b")
        ]
        for stream, blobs in (("a", None), ("b", {"sha2": "text"})):  # the scalar, then the array statement
            with pytest.raises(IntegrityError, match="would leave a gap"):
                recorder.insert_events([StoredEvent(stream, 4, "t", b"x")], blobs=blobs)
