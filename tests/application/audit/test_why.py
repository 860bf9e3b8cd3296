"""The why-trace on a real transcript: where a tool output entered, which call removed it, by which rule."""

from __future__ import annotations

from pathlib import Path

import pytest
from contextledger.adapters.formats.openai import to_openai
from contextledger.adapters.importers.service import import_file
from contextledger.application.audit.call_recorder import CallRecorder
from contextledger.application.audit.forensics import why
from contextledger.application.render.renderer import Renderer
from contextledger.domain.events import AssistantMessageAdded, ToolResultRecorded
from contextledger.projections.presets import PRESETS

TRANSCRIPT = (
    Path(__file__).resolve().parents[2]
    / "fixtures"
    / "transcripts"
    / "mini-swe-agent__pylint-dev__pylint-6528.traj.json"
)


@pytest.fixture
def session(ledger):
    """The pylint mini-swe-agent run (97 steps) in an in-memory ledger."""
    assert import_file(ledger, TRANSCRIPT).ok
    [info] = ledger.sessions()
    return info.session_id


def _early_output_line(ledger, session_id) -> tuple[int, str]:
    for recorded in ledger.events(session_id):
        if isinstance(recorded.event, ToolResultRecorded):
            lines = [
                line.strip()
                for line in ledger.text(recorded.event.content).splitlines()
                if len(line.strip()) > 30
            ]
            if lines:
                return recorded.position, lines[0]
    raise AssertionError("no tool output")


def test_why_names_the_call_and_rule_that_removed_an_early_output_line(ledger, session):
    """Computed calls (no records), default policy at 16k: the verdict names call, reducer and rule."""
    position, line = _early_output_line(ledger, session)
    answer = why(
        ledger,
        session,
        line,
        renderer=Renderer(ledger, tokenizer="heuristic"),
        policy=PRESETS["default"],
        budget=16_000,
    )
    assert answer.entered_at == position
    assert answer.calls_source == "computed"
    assert answer.first_left_call is not None
    assert answer.first_left_position > position
    assert answer.disposition in {"stubbed", "truncated", "dropped", "summarized"}
    assert answer.rule
    assert answer.rule in answer.verdict
    assert answer.first_left_call in answer.verdict
    assert answer.smallest_change
    kept_before = [f for f in answer.calls if f.position < answer.first_left_position]
    assert all(f.disposition in {"verbatim", "pinned"} for f in kept_before)


def test_why_reads_recorded_calls_when_there_are_some(ledger, session):
    """With model_calls records, the trace is the recorded one (same verdict as computing it)."""
    position, line = _early_output_line(ledger, session)
    renderer = Renderer(ledger, tokenizer="heuristic")
    recorder = CallRecorder(ledger)
    policy = PRESETS["default"]
    for recorded in ledger.events(session):
        if isinstance(recorded.event, AssistantMessageAdded) and recorded.position > 2:
            context = renderer.render(session, policy, at=recorded.position - 1, budget=16_000)
            recorder.record(context, policy, payload=to_openai(context), call_id=f"c{recorded.position}")
    recorded_answer = why(ledger, session, line, renderer=renderer)
    computed = why(ledger, session, line, renderer=renderer, policy=policy, budget=16_000)
    assert recorded_answer.calls_source == "recorded"
    assert recorded_answer.entered_at == position
    assert recorded_answer.first_left_position == computed.first_left_position
    assert recorded_answer.rule == computed.rule
    assert recorded_answer.first_left_call == f"c{recorded_answer.first_left_position + 1}"


def test_text_never_in_the_log_says_so(ledger, session):
    """A fact the session never held is reported as such, not as forgotten."""
    answer = why(ledger, session, "no such text 0xDEADBEEF", renderer=Renderer(ledger, tokenizer="heuristic"))
    assert answer.entered_at is None
    assert "never held" in answer.verdict


@pytest.mark.parametrize("offset", [-1, 0, 1, 500])
def test_why_at_a_position_outside_the_session_is_refused(ledger, session, offset):
    """``why --position`` outside 1..head is a ValidationError naming the range, not "never held it"."""
    from contextledger.domain.errors import ValidationError  # noqa: PLC0415

    head = ledger.version(session)
    position = {-1: -1, 0: 0, 1: head + 1, 500: head + 500}[offset]
    renderer = Renderer(ledger, tokenizer="heuristic")
    with pytest.raises(ValidationError, match=rf"position {position} is outside session .* \(1\.\.{head}\)"):
        why(ledger, session, "", renderer=renderer, position=position, policy=PRESETS["default"])
    assert why(ledger, session, "", renderer=renderer, position=head, policy=PRESETS["default"]) is not None
