"""No cut without pressure: a context far below its budget reaches the model byte for byte."""

from __future__ import annotations

from pathlib import Path

import contextledger
import pytest
from contextledger.adapters.importers.service import import_file
from contextledger.application.render.renderer import Renderer
from contextledger.domain.events import AssistantMessageAdded, ToolResultRecorded, UserMessageAdded

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "transcripts"
TRANSCRIPT = FIXTURES / "swe-agent__swe-agent__test-repo-i1.traj"


@pytest.fixture(scope="module")
def session() -> tuple[contextledger.Ledger, str]:
    """The SWE-agent test-repo session, whose demonstration message is ~31k characters."""
    ledger = contextledger.open_ledger("memory://")
    outcome = import_file(ledger, TRANSCRIPT)
    assert outcome.ok, outcome.error
    return ledger, ledger.sessions()[0].session_id


def _logged_texts(ledger: contextledger.Ledger, session_id: str) -> dict[int, str]:
    out = {}
    for recorded in ledger.events(session_id):
        event = recorded.event
        if isinstance(event, UserMessageAdded | ToolResultRecorded):
            out[recorded.position] = ledger.text(event.content)
        elif isinstance(event, AssistantMessageAdded):
            out[recorded.position] = "" if event.content is None else ledger.text(event.content)
    return out


@pytest.mark.parametrize("budget", [32_000, 64_000])
def test_the_demonstration_reaches_the_model_unchanged_far_below_budget(session, budget):
    """At every call, while no compaction point was reached, every message is sent as logged.

    The issue saw the ~31k-character demonstration cut to 27k at a 32k budget with 9.3k used.
    """
    ledger, session_id = session
    logged = _logged_texts(ledger, session_id)
    demonstration = max(logged, key=lambda position: len(logged[position]))
    assert len(logged[demonstration]) > 30_000
    renderer = Renderer(ledger)
    projector = renderer.projector("default", budget=budget)
    checked = 0
    for recorded in ledger.events(session_id)[1:]:
        state = renderer.state(session_id, projector, at=recorded.position)
        if state.compactions:
            break
        context = renderer.render(session_id, "default", at=recorded.position, budget=budget)
        assert context.tokens < projector.budget.high_mark
        for message in context.messages:
            if not message.sources:
                continue  # the placeholder of a call still waiting for its result
            assert message.kind == "message", (recorded.position, message.sources, message.kind)
            assert message.text == logged[message.sources[0]]
        checked += 1
    assert checked > 5
    shown = [m for m in context.messages if m.sources == (demonstration,)]
    assert [m.text for m in shown] == [logged[demonstration]]
