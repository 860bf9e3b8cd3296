"""Restore by pin: a pinned stubbed, dropped or summarized event comes back verbatim; unpin reverses it."""

from __future__ import annotations

from typing import Any

import pytest
from contextledger.application.audit.call_recorder import CallRecorder
from contextledger.application.render.renderer import Renderer
from contextledger.domain.errors import PinnedOverBudgetError
from contextledger.projections.policy import Policy


def _policy(**sections: Any) -> Policy:
    base: dict[str, Any] = {
        "name": "restore-test",
        "budget": {"total": 4000, "output_reserve": 0, "high_water": 0.9, "low_water": 0.5},
        "retention": {"enabled": False},
        "truncation": {"enabled": False},
        "window": {"keep_first": 0},
        "card": {"enabled": False},  # stubs placed by exact budget arithmetic
    }
    for key, value in sections.items():
        base[key] = base.get(key, {}) | value
    return Policy.parse(base)


STUBBING = _policy(retention={"enabled": True, "tools": {"read_file": {"keep_last": 2}}})
WINDOWED = _policy(window={"keep_first": 0, "keep_recent": 3, "keep_recent_unit": "steps"})


def _session(ledger, steps: int = 8, words: int = 60) -> tuple[str, dict[int, str]]:
    """A task then ``steps`` read_file steps; returns the session and each result's position -> text."""
    session = ledger.start_session(system_prompt="sys", tools=[{"name": "read_file"}])
    ledger.add_user_message(session, "the task")
    results: dict[int, str] = {}
    for i in range(steps):
        ledger.add_assistant_message(session, f"step {i}", tool_calls=[{"id": f"c{i}", "name": "read_file"}])
        text = f"RESULT-{i} " + " ".join(f"w{i}x{j}" for j in range(words))
        results[ledger.add_tool_result(session, f"c{i}", text)] = text
    return session, results


def _shown(context) -> dict[int, str]:
    return {m.sources[0]: m.text for m in context.messages if m.sources}


def _kind(context, position: int) -> str | None:
    return next((m.kind for m in context.messages if position in m.sources), None)


def test_pin_brings_a_stubbed_result_back_verbatim(ledger):
    """Pinning a stubbed result shows it whole in the next render and in later ones (was: stub stayed)."""
    session, results = _session(ledger)
    renderer = Renderer(ledger, tokenizer="heuristic")
    first = min(results)
    assert _kind(renderer.render(session, STUBBING), first) == "stub"
    ledger.pin(session, first, reason="needed again")
    context = renderer.render(session, STUBBING)
    assert _shown(context)[first] == results[first]
    assert any(
        d.action == "pinned" and d.rule == "explicit" and d.first <= first <= d.last
        for d in context.decisions
    )
    ledger.add_user_message(session, "go on")
    later = Renderer(ledger, tokenizer="heuristic").render(session, STUBBING)  # fresh fold agrees
    assert _shown(later)[first] == results[first]
    assert later.tokens <= later.budget


def test_unpin_puts_the_stub_back(ledger):
    """Unpinning a restored result brings its earlier form (the stub) back in the next render."""
    session, results = _session(ledger)
    first = min(results)
    renderer = Renderer(ledger, tokenizer="heuristic")
    stub = _shown(renderer.render(session, STUBBING))[first]
    ledger.pin(session, first)
    ledger.unpin(session, first)
    assert _shown(renderer.render(session, STUBBING))[first] == stub


def test_pin_brings_a_dropped_group_back_paired(ledger):
    """Pinning a result the window dropped re-admits its whole step group (call and result), verbatim."""
    session, results = _session(ledger)
    renderer = Renderer(ledger, tokenizer="heuristic")
    first = min(results)
    before = renderer.render(session, WINDOWED)
    assert first not in _shown(before)
    assert any(d.action == "dropped" and d.first <= first <= d.last for d in before.decisions)
    ledger.pin(session, first)
    context = renderer.render(session, WINDOWED)
    shown = _shown(context)
    assert shown[first] == results[first]
    assert first - 1 in shown  # its call
    calls = [c.id for m in context.messages for c in m.tool_calls]
    assert calls == [m.tool_call_id for m in context.messages if m.role == "tool"]
    assert not any(d.action == "dropped" and d.first <= first <= d.last for d in context.decisions)
    assert Renderer(ledger, tokenizer="heuristic").render(session, WINDOWED).messages == context.messages


def test_unpin_drops_the_restored_group_again(ledger):
    """Unpinning a re-admitted group takes it out of the next render again."""
    session, results = _session(ledger)
    first = min(results)
    ledger.pin(session, first)
    ledger.unpin(session, first)
    context = Renderer(ledger, tokenizer="heuristic").render(session, WINDOWED)
    assert first not in _shown(context)
    assert first - 1 not in _shown(context)


def test_pin_undoes_a_summary_over_that_span(ledger):
    """A summarized result comes back verbatim next to the summary when pinned (undoing the compaction)."""
    session, results = _session(ledger)
    positions = sorted(results)
    ledger.record_summary(session, covers_from=2, covers_through=positions[3], text="SUMMARY of the start")
    ledger.add_user_message(session, "next")
    renderer = Renderer(ledger, tokenizer="heuristic")
    policy = _policy(summary={"on_arrival": True})
    assert positions[1] not in _shown(renderer.render(session, policy))
    ledger.pin(session, positions[1])
    context = renderer.render(session, policy)
    assert context.summary_id is not None
    assert _shown(context)[positions[1]] == results[positions[1]]


def test_pin_that_cannot_fit_says_by_how_much(ledger):
    """Pinning a result larger than the budget raises PinnedOverBudgetError saying by how much."""
    session, _ = _session(ledger, steps=6, words=60)
    ledger.add_assistant_message(session, "big", tool_calls=[{"id": "big", "name": "read_file"}])
    text = " ".join(f"h{j}" for j in range(6000))
    huge = ledger.add_tool_result(session, "big", text)
    for i in range(4):
        ledger.add_assistant_message(session, f"more {i}", tool_calls=[{"id": f"m{i}", "name": "read_file"}])
        ledger.add_tool_result(session, f"m{i}", "small")
    policy = _policy(
        window={"keep_first": 0, "keep_recent": 2, "keep_recent_unit": "steps"}, budget={"total": 20000}
    )
    renderer = Renderer(ledger, tokenizer="heuristic")
    assert _shown(renderer.render(session, policy, budget=3000)).get(huge) != text
    ledger.pin(session, huge)
    with pytest.raises(PinnedOverBudgetError) as caught:
        renderer.render(session, policy, budget=3000)
    assert caught.value.over_by > 0
    assert caught.value.over_by == caught.value.pinned_tokens - caught.value.budget_tokens


def test_pin_is_a_new_event_and_the_log_is_not_edited(ledger):
    """A pin appends one event (carrying the group's events) and leaves every earlier event as it was."""
    session, results = _session(ledger)
    before = ledger.events(session)
    position = ledger.pin(session, min(results))
    after = ledger.events(session)
    assert after[:-1] == before
    assert position == len(before) + 1
    restore = after[-1].event.meta["restore"]
    assert [r["seq"] for r in restore] == [min(results) - 1, min(results)]


def test_pin_span_undoes_a_compaction_and_unpin_span_redoes_it(ledger):
    """Pinning the span a summary covers brings every message of it back; unpinning the span removes them."""
    session, results = _session(ledger)
    positions = sorted(results)
    ledger.record_summary(session, covers_from=3, covers_through=positions[3], text="SUMMARY of the start")
    ledger.add_user_message(session, "next")
    renderer = Renderer(ledger, tokenizer="heuristic")
    policy = _policy(summary={"on_arrival": True})
    compacted = renderer.render(session, policy)
    assert not set(positions[:4]) & set(_shown(compacted))
    pins = ledger.pin_span(session, 3, positions[3], reason="undo compaction")
    assert len(pins) == positions[3] - 2  # one pin per message of the span
    restored = _shown(renderer.render(session, policy))
    assert all(restored[p] == results[p] for p in positions[:4])
    assert all(p - 1 in restored for p in positions[:4])  # each with its call
    ledger.unpin_span(session, 3, positions[3])
    again = renderer.render(session, policy)
    assert not set(positions[:4]) & set(_shown(again))
    assert again.summary_id == compacted.summary_id


def test_a_call_after_a_restore_is_recorded_pinned_and_replays(ledger):
    """The call record marks the restored group pinned, its tiers add up, and replay-call reproduces it."""
    session, results = _session(ledger)
    first = min(results)
    ledger.pin(session, first)
    renderer = Renderer(ledger, tokenizer="heuristic")
    context = renderer.render(session, WINDOWED)
    recorder = CallRecorder(ledger)
    record = recorder.record(context, WINDOWED)
    fates = {p: run.disposition for run in record.dispositions for p in range(run.first, run.last + 1)}
    assert fates[first] == fates[first - 1] == "pinned"
    assert fates[first + 2] == "dropped"  # the next, unpinned step stays evicted
    assert record.tiers.total == record.tokens
    _, again = recorder.rerender(Renderer(ledger, tokenizer="heuristic"), session, record.call_id)
    assert again.messages == context.messages
