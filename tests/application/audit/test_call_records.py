"""model_calls records on every real transcript: tiers add up, exact dispositions, byte-for-byte replay."""

from __future__ import annotations

import itertools
from pathlib import Path

import contextledger
import pytest
from contextledger.adapters.formats.openai import to_openai
from contextledger.adapters.importers.service import import_file
from contextledger.application.audit.call_recorder import CallRecorder, payload_sha
from contextledger.application.render.renderer import Renderer
from contextledger.domain.errors import ReplayMismatchError
from contextledger.projections.presets import PRESETS

TRANSCRIPTS = Path(__file__).resolve().parents[2] / "fixtures" / "transcripts"
BUDGET = 16_000


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """All transcripts in one in-memory ledger."""
    del tmp_path_factory
    ledger = contextledger.open_ledger("memory://")
    for path in sorted(TRANSCRIPTS.iterdir()):
        if path.name not in {"FORMATS.md", "PROVENANCE.md"}:
            assert import_file(ledger, path).ok
    return ledger


def _positions_before_each_call(ledger, session_id):
    return [
        r.position - 1 for r in ledger.events(session_id) if type(r.event).__name__ == "AssistantMessageAdded"
    ]


_SHOWN = {
    "message": {"verbatim", "pinned"},
    "truncated": {"truncated", "pinned"},
    "stub": {"stubbed", "pinned"},
}


def _assert_exact(context, runs) -> None:
    """Every shown event's fate is what its message shows (never a neighbour's label)."""
    fates = {p: run.disposition for run in runs for p in range(run.first, run.last + 1)}
    for message in context.messages:
        for position in message.sources if message.kind in _SHOWN else ():
            assert fates[position] in _SHOWN[message.kind], (position, message.kind, fates[position])
    shown = {p for m in context.messages if m.kind in _SHOWN for p in m.sources}
    for position, fate in fates.items():
        if fate in {"verbatim", "truncated", "stubbed"}:
            assert position in shown, (position, fate)


def test_every_call_of_every_session_is_recorded_exactly_and_replays(source):
    """Default policy at 16k: tiers sum to the total, each position has one fate, replay is byte-identical."""
    policy = PRESETS["default"]
    renderer = Renderer(source, tokenizer="heuristic")
    recorder = CallRecorder(source)
    recorded = 0
    for info in source.sessions():
        for position in _positions_before_each_call(source, info.session_id):
            if position < 2:
                continue
            context = renderer.render(info.session_id, policy, at=position, budget=BUDGET)
            payload = to_openai(context)
            record = recorder.record(context, policy, payload=payload)
            recorded += 1
            assert record.tiers.total == record.tokens == context.tokens
            runs = record.dispositions
            _assert_exact(context, runs)
            assert runs[0].first == 1
            assert runs[0].disposition == ("pinned" if context.system else "control")
            assert runs[-1].last == position
            assert all(b.first == a.last + 1 for a, b in itertools.pairwise(runs))
        fresh = Renderer(source, tokenizer="heuristic")
        for view in recorder.calls(info.session_id):
            again, context = recorder.rerender(fresh, info.session_id, view.record.call_id)
            assert payload_sha(to_openai(context)) == again.payload_sha
    assert recorded > 1_000


def test_a_changed_log_is_reported_as_a_replay_mismatch(ledger):
    """A record whose context no longer renders the same (here: a summary backfilled) fails loudly."""
    session = ledger.start_session(system_prompt="s")
    for turn in range(4):
        ledger.add_user_message(session, f"question {turn} " + "words " * 50)
        ledger.add_assistant_message(session, f"answer {turn}")
    renderer = Renderer(ledger, tokenizer="heuristic")
    recorder = CallRecorder(ledger)
    policy = PRESETS["default"].model_copy(
        update={
            "name": "default-on-arrival",
            "summary": PRESETS["default"].summary.model_copy(update={"on_arrival": True}),
        }
    )
    context = renderer.render(session, policy)
    record = recorder.record(context, policy, payload=to_openai(context))
    ledger.record_summary(session, covers_from=2, covers_through=7, text="backfilled summary", produced_at=8)
    with pytest.raises(ReplayMismatchError):
        recorder.rerender(Renderer(ledger, tokenizer="heuristic"), session, record.call_id)


def test_a_call_is_recorded_under_a_preset_named_as_under_the_preset_itself(ledger):
    """``record`` takes a preset's name as ``render`` does: the same record, replayable; a typo is refused."""
    session = ledger.start_session(system_prompt="s")
    ledger.add_user_message(session, "question")
    renderer = Renderer(ledger, tokenizer="heuristic")
    context = renderer.render(session, "default")
    by_name = CallRecorder(ledger).record(context, "default", payload=to_openai(context), call_id="c1")
    by_policy = CallRecorder(ledger).record(
        context, PRESETS["default"], payload=to_openai(context), call_id="c2"
    )
    assert (by_name.policy, by_name.policy_hash, by_name.context_sha) == (
        by_policy.policy,
        by_policy.policy_hash,
        by_policy.context_sha,
    )
    CallRecorder(ledger).rerender(Renderer(ledger, tokenizer="heuristic"), session, "c1")
    with pytest.raises(contextledger.ConfigError, match="unknown policy 'defualt'"):
        CallRecorder(ledger).record(context, "defualt", payload=to_openai(context), call_id="c3")
