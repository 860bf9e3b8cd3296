"""SQLite reads a few streams' heads in one statement, with no transaction around it (ADR 0058's addendum)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import contextledger
import pytest
from contextledger.application.render.renderer import Renderer


@pytest.fixture
def traced(monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[bool]]:
    """Every statement sent on a SQLite connection opened from now on, while the flag is on."""
    executed: list[str] = []
    tracing = [False]
    connect = sqlite3.connect

    def traced_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)
        conn.set_trace_callback(lambda sql: executed.append(sql) if tracing[0] else None)
        return conn

    monkeypatch.setattr(sqlite3, "connect", traced_connect)
    return executed, tracing


def test_the_heads_of_a_few_streams_are_one_statement_and_past_500_one_transaction(
    tmp_path: Path, traced: tuple[list[str], list[bool]]
) -> None:
    """No BEGIN or ROLLBACK around one statement (its own snapshot); more statements share one transaction."""
    executed, tracing = traced
    with contextledger.open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        a = ledger.start_session(session_id="a")
        ledger.add_user_message(a, "hello")
        b = ledger.start_session(session_id="b")
        log = ledger.ports.log
        tracing[0] = True
        assert log.versions([a, b, "nobody"]) == {a: 2, b: 1, "nobody": 0}
        tracing[0] = False
        assert len(executed) == 1
        assert executed[0].startswith("WITH ids(id)")
        executed.clear()
        many = [a, *(f"nobody-{i}" for i in range(600)), b]
        tracing[0] = True
        found = log.versions(many)
        tracing[0] = False
        assert found == {a: 2, b: 1} | dict.fromkeys(many[1:-1], 0)
        assert [s.split()[0] for s in executed] == ["BEGIN", "WITH", "WITH", "ROLLBACK"]


def test_a_warm_render_sends_one_statement_and_sees_an_append_from_another_ledger(
    tmp_path: Path, traced: tuple[list[str], list[bool]]
) -> None:
    """A render with nothing new reads both heads in one statement; another ledger's append is seen."""
    executed, tracing = traced
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with contextledger.open_ledger(url) as ledger, contextledger.open_ledger(url) as other:
        session = ledger.start_session(session_id="s", system_prompt="be brief")
        ledger.add_user_message(session, "hello")
        renderer = Renderer(ledger)
        first = renderer.render(session, "default")
        tracing[0] = True
        warm = renderer.render(session, "default")
        tracing[0] = False
        assert warm.messages == first.messages
        assert len(executed) == 1
        other.add_user_message(session, "and another thing")
        later = renderer.render(session, "default")
        assert [m.text for m in later.messages][-1] == "and another thing"
