"""Fixtures of the rebuild use case's tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import contextledger
import pytest
from contextledger.adapters.importers.service import import_file
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.render.renderer import Renderer

from tests.conftest import TRANSCRIPTS

TWO_TRANSCRIPTS = (
    "mini-swe-agent__psf__requests-1142.traj.json",
    "claude-code__132b2f66-ee5f-46f6-8904-32d9dc4d36c3.jsonl",
)


def rendered_differently(ledger: Ledger, first: str, second: str, budget: int = 16_000) -> list[str]:
    """The sessions whose contexts differ under two presets, rendered afresh: what a comparison must name.

    At 16,000 tokens the Claude Code session renders alike under default and threshold since the head
    keeps to its cap (ADR 0092); the mini-SWE-agent one differs.
    """
    renderer = Renderer(ledger, snapshots=False)

    def shown(session_id: str, name: str) -> list[tuple[str, str, str]]:
        context = renderer.render(session_id, name, budget=budget)
        return [(m.role, m.kind, m.text) for m in context.messages]

    found = sorted(
        s.session_id for s in ledger.sessions() if shown(s.session_id, first) != shown(s.session_id, second)
    )
    assert found, "the two presets render every session alike: nothing to compare"
    return found


def _holding_two_transcripts(url: str) -> Iterator[Ledger]:
    with contextledger.open_ledger(url) as opened:
        for name in TWO_TRANSCRIPTS:
            assert import_file(opened, TRANSCRIPTS / name).ok
        yield opened


@pytest.fixture
def two_transcripts(tmp_path: Path) -> Iterator[Ledger]:
    """A SQLite ledger holding two real transcripts (``TWO_TRANSCRIPTS``)."""
    yield from _holding_two_transcripts(f"sqlite:///{tmp_path / 'r.db'}")


@pytest.fixture(params=["sqlite_url", pytest.param("pg_url", marks=pytest.mark.postgres)])
def two_transcripts_each_store(request: pytest.FixtureRequest) -> Iterator[Ledger]:
    """The same ledger on a SQLite file, then on the PostgreSQL server (a fresh schema)."""
    yield from _holding_two_transcripts(request.getfixturevalue(request.param))


@pytest.fixture
def filled(ledger):
    """The conftest ledger holding two short sessions with a tool call each."""
    for n in range(2):
        session = ledger.start_session(session_id=f"s{n}", system_prompt="sys")
        ledger.add_user_message(session, f"question {n} " * 40)
        ledger.add_assistant_message(session, tool_calls=[{"id": "c", "name": "ls", "arguments": {}}])
        ledger.add_tool_result(session, "c", "file " * 400)
    return ledger


@pytest.fixture
def forked(tmp_path: Path) -> Iterator[Ledger]:
    """A SQLite ledger: ``parent`` (a prompt and ten questions), ``child`` forked at 6 with three more."""
    with contextledger.open_ledger(f"sqlite:///{tmp_path / 'fork.db'}") as ledger:
        ledger.start_session(session_id="parent", system_prompt="sys")
        for number in range(10):
            ledger.add_user_message("parent", f"question {number}")
        fork = ledger.fork("parent", 6, new_session_id="child")
        for number in range(3):
            ledger.add_user_message(fork, f"other question {number}")
        yield ledger
