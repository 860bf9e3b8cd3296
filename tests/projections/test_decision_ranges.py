"""A render's decisions never say "kept" over positions they also say were dropped."""

from __future__ import annotations

import contextledger
from contextledger.application.render.renderer import Renderer
from contextledger.projections.presets import PRESETS


def _late_result() -> tuple[contextledger.Ledger, str, int]:
    """A call whose result comes back after thirty steps that a compaction then drops; returns the call."""
    ledger = contextledger.open_ledger("memory://")
    sid = ledger.start_session(system_prompt="s", tools=[{"name": "bash"}])
    ledger.add_user_message(sid, "Task: build it")
    for i in range(30):
        ledger.add_assistant_message(
            sid, f"step {i}", tool_calls=[{"id": f"c{i}", "name": "bash", "arguments": {}}]
        )
        ledger.add_tool_result(sid, f"c{i}", f"out {i} " * 120)
    slow = ledger.add_assistant_message(
        sid, "start the slow build", tool_calls=[{"id": "slow", "name": "bash", "arguments": {}}]
    )
    for i in range(30, 40):
        ledger.add_assistant_message(
            sid, f"step {i}", tool_calls=[{"id": f"c{i}", "name": "bash", "arguments": {}}]
        )
        ledger.add_tool_result(sid, f"c{i}", f"out {i} " * 120)
    ledger.add_tool_result(sid, "slow", "build finished")
    for i in range(40, 44):
        ledger.add_assistant_message(
            sid, f"step {i}", tool_calls=[{"id": f"c{i}", "name": "bash", "arguments": {}}]
        )
        ledger.add_tool_result(sid, f"c{i}", f"out {i} " * 120)
    return ledger, sid, slow


def test_a_late_results_group_is_not_kept_over_the_groups_dropped_between():
    """A late result's step group is cut around the groups dropped between its call and its result.

    It spans them: ``kept 242-269`` was said beside ``dropped 243-250``. Each part counts its own messages.
    """
    ledger, sid, slow = _late_result()
    context = Renderer(ledger, tokenizer="heuristic").render(sid, PRESETS["default"], budget=6_000)
    ranges = sorted((d.first, d.last, d.action) for d in context.decisions if d.rule != "system")
    dropped = [(a, b) for a, b, action in ranges if action == "dropped"]
    shown = [(a, b) for a, b, action in ranges if action in {"kept", "pinned", "stubbed", "truncated"}]
    assert any(a <= slow <= b for a, b in shown)  # the case under test: the late result's group is shown
    assert any(slow < a for a, _ in dropped)
    for first, last in shown:
        assert not any(first <= a and b <= last for a, b in dropped), (first, last, dropped)
    counted = sum(
        int(d.detail.split(" message")[0])
        for d in context.decisions
        if d.action in {"kept", "pinned", "stubbed", "truncated"} and d.rule != "system"
    )
    assert counted == sum(
        len(m.sources) for m in context.messages if m.kind in {"message", "stub", "truncated"}
    )
