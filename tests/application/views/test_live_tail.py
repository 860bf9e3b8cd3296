"""The live tail after catch-up: woken by the store (LISTEN/NOTIFY on PostgreSQL, a poll on SQLite)."""

from __future__ import annotations

import threading
import time

import contextledger
import pytest
from contextledger.adapters.store.notification_waiters import notification_waiter
from contextledger.adapters.store.projections import RecorderProjections
from contextledger.application.rebuild.blue_green import RebuildSpec
from contextledger.application.rebuild.projection_runner import ProjectionRunner
from contextledger.projections.presets import get_preset


@pytest.fixture(params=["sqlite", "postgres"])
def url(request, tmp_path) -> str:
    """A fresh SQLite file or PostgreSQL schema."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'tail.db'}"
    return request.getfixturevalue("pg_url")


def test_an_append_from_another_ledger_wakes_the_tail_long_before_its_poll(url):
    """With a 10-minute poll, only the store's wake-up can bring a new event into the view."""
    with contextledger.open_ledger(url) as ledger:
        session_id = ledger.start_session(session_id="s", system_prompt="be brief")
        ledger.add_user_message(session_id, "hello")
        views = RecorderProjections(ledger.ports.log)  # type: ignore[arg-type]
        spec = RebuildSpec(get_preset("default").model_dump_json(), audit_views=("summaries", "calls"))
        runner: ProjectionRunner = spec.runner(ledger, views, views)
        waiter = notification_waiter(ledger.ports.log)  # type: ignore[arg-type]
        stop = threading.Event()
        tail = threading.Thread(
            target=lambda: runner.follow(stop=stop.is_set, waiter=waiter, poll=600.0), daemon=True
        )
        tail.start()
        deadline = time.monotonic() + 30
        while views.load_row(runner.projection, session_id) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert views.load_row(runner.projection, session_id) == (
            2,
            views.load_row(runner.projection, session_id)[1],
        )
        with contextledger.open_ledger(url) as writer:  # another connection, as another process would be
            writer.add_user_message(session_id, "a new question")
        while (row := views.load_row(runner.projection, session_id)) and row[0] < 3:
            assert time.monotonic() < deadline, "the tail was not woken"
            time.sleep(0.05)
        stop.set()
        waiter.close()  # ends the wait in progress
        tail.join(timeout=30)
        assert not tail.is_alive()
        assert views.load_tracking(runner.projection) == views.load_tracking("summaries/v1")
