"""Every preset renders every session of tests/fixtures/transcripts within budget, before every model call."""

from __future__ import annotations

from pathlib import Path

import contextledger
import pytest
from contextledger.adapters.formats.anthropic import to_anthropic
from contextledger.adapters.formats.openai import to_openai
from contextledger.adapters.importers.service import import_file
from contextledger.application.render.renderer import Renderer
from contextledger.domain.events import AssistantMessageAdded, UserMessageAdded
from contextledger.projections.counting import count_context
from contextledger.projections.presets import PRESETS
from contextledger.testing import check_anthropic_pairing, check_openai_pairing

TRANSCRIPTS = Path(__file__).resolve().parents[2] / "fixtures" / "transcripts"
BUDGETS = [None, 32_000, 8_000]
SKIP = {"FORMATS.md", "PROVENANCE.md"}


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> contextledger.Ledger:
    """All transcripts in one SQLite ledger, through the importers."""
    folder = TRANSCRIPTS
    assert folder.is_dir(), f"no transcripts folder at {folder}"
    url = f"sqlite:///{tmp_path_factory.mktemp('render') / 'all.db'}"
    ledger = contextledger.open_ledger(url)
    for path in sorted(folder.iterdir()):
        if path.name in SKIP:
            continue
        outcome = import_file(ledger, path)
        assert outcome.ok, outcome.error
    return ledger


def _call_positions(ledger: contextledger.Ledger, session_id: str) -> list[int]:
    events = ledger.events(session_id)
    calls = [r.position - 1 for r in events if isinstance(r.event, AssistantMessageAdded) and r.position > 2]
    return [*calls, events[-1].position]


@pytest.mark.parametrize("budget", BUDGETS, ids=lambda b: f"budget-{b or 'preset'}")
@pytest.mark.parametrize("preset", list(PRESETS))
def test_every_preset_renders_every_session_within_budget(imported, preset, budget):
    """Before every model call of every session: within budget, task kept, never empty, every call paired."""
    renderer = Renderer(imported)
    sessions = [s.session_id for s in imported.sessions()]
    assert len(sessions) == 224
    calls = 0
    for session_id in sessions:
        first_task = next(
            (r.position for r in imported.events(session_id) if isinstance(r.event, UserMessageAdded)), None
        )
        for position in _call_positions(imported, session_id):
            context = renderer.render(session_id, preset, at=position, budget=budget)
            calls += 1
            assert context.tokens <= context.budget
            if budget is not None:
                assert context.budget == budget
            if first_task is not None and first_task <= position:
                assert any(m.sources == (first_task,) for m in context.messages), (session_id, position)
            assert context.messages or position == 1, (session_id, position)
            assert check_openai_pairing(to_openai(context)) == [], (session_id, position)
    assert calls > 3000


@pytest.mark.parametrize("preset", ["default", "blocks"])
def test_recount_and_wire_pairing_at_32k(imported, preset):
    """At 32k the recount with cl100k equals the tokens, and both wire formats pair every call."""
    renderer = Renderer(imported)
    for info in imported.sessions():
        context = renderer.render(info.session_id, preset, budget=32_000)
        assert count_context(context, renderer.counter) == context.tokens
        assert check_openai_pairing(to_openai(context)) == []
        assert check_anthropic_pairing(to_anthropic(context)) == []


def test_the_868k_char_submission_is_cut_to_fit(imported):
    """mini-swe-agent psf__requests-1142 ends on an 868k-char result: it is cut on arrival, not fatal."""
    renderer = Renderer(imported)
    session = next(s.session_id for s in imported.sessions() if "requests-1142" in s.session_id)
    for budget in (8_000, 32_000, None):
        context = renderer.render(session, "default", budget=budget)
        last = context.messages[-1]
        assert last.kind == "truncated"
        assert f"restore: seq {context.position}" in last.text
        assert context.tokens <= context.budget
