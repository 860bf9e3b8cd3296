"""SQLite reads a few streams' heads in one statement, with no transaction around it (ADR 0058's addendum)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import contextledger
from contextledger.application.render.renderer import Renderer

if TYPE_CHECKING:
    from pathlib import Path

    from tests.adapters.store.conftest import Statements


def test_the_heads_of_a_few_streams_are_one_statement_and_past_500_one_transaction(
    tmp_path: Path, sqlite_statements: Statements
) -> None:
    """No BEGIN or ROLLBACK around one statement (its own snapshot); more statements share one transaction."""
    with contextledger.open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        a = ledger.start_session(session_id="a")
        ledger.add_user_message(a, "hello")
        b = ledger.start_session(session_id="b")
        log = ledger.ports.log
        with sqlite_statements.recording() as executed:
            assert log.versions([a, b, "nobody"]) == {a: 2, b: 1, "nobody": 0}
        assert len(executed) == 1
        assert executed[0].startswith("WITH ids(id)")
        many = [a, *(f"nobody-{i}" for i in range(600)), b]
        with sqlite_statements.recording() as executed:
            found = log.versions(many)
        assert found == {a: 2, b: 1} | dict.fromkeys(many[1:-1], 0)
        assert [s.split()[0] for s in executed] == ["BEGIN", "WITH", "WITH", "ROLLBACK"]


def test_a_warm_render_sends_one_statement_and_sees_an_append_from_another_ledger(
    tmp_path: Path, sqlite_statements: Statements
) -> None:
    """A render with nothing new reads both heads in one statement; another ledger's append is seen."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with contextledger.open_ledger(url) as ledger, contextledger.open_ledger(url) as other:
        session = ledger.start_session(session_id="s", system_prompt="be brief")
        ledger.add_user_message(session, "hello")
        renderer = Renderer(ledger)
        first = renderer.render(session, "default")
        with sqlite_statements.recording() as executed:
            warm = renderer.render(session, "default")
        assert warm.messages == first.messages
        assert len(executed) == 1
        other.add_user_message(session, "and another thing")
        later = renderer.render(session, "default")
        assert [m.text for m in later.messages][-1] == "and another thing"
