"""Clip-archive batches are shown within the room the pinned parts leave (``clip_within_room``, ADR 0094)."""

from __future__ import annotations

import contextledger
import pytest
from contextledger.application.render.renderer import Renderer
from contextledger.projections.presets import PRESETS

CLIP = PRESETS["clip-archive"]


def _session() -> tuple[contextledger.Ledger, str]:
    """Forty steps, six summary batches of about 1,400 tokens each (each within the per-summary bound)."""
    ledger = contextledger.open_ledger("memory://")
    sid = ledger.start_session(session_id="six-batches", system_prompt="You are a coding agent.")
    ledger.add_user_message(sid, "Fix the parser.")
    for i in range(40):
        ledger.add_assistant_message(
            sid, f"step {i}", tool_calls=[{"id": f"c{i}", "name": "bash", "arguments": {}}]
        )
        ledger.add_tool_result(sid, f"c{i}", f"out {i} " * 150)
    for k in range(6):
        words = " ".join(f"fact{k}-{w}" for w in range(230))
        ledger.record_summary(
            sid, covers_from=3 + 12 * k, covers_through=14 + 12 * k, text=f"## Batch {k}\n{words}"
        )
    ledger.add_user_message(sid, "go on")
    for i in range(40, 52):
        ledger.add_assistant_message(
            sid, f"step {i}", tool_calls=[{"id": f"c{i}", "name": "bash", "arguments": {}}]
        )
        ledger.add_tool_result(sid, f"c{i}", f"out {i} " * 150)
    return ledger, sid


def test_the_batches_shown_leave_out_the_middle_most_to_fit():
    """The first two and last two batches, each within the bound, pinned more than the budget together.

    The render failed (``PinnedOverBudgetError``) where the same session renders without summaries. Now the
    middle-most batch is left out, and the context fits.
    """
    ledger, sid = _session()
    context = Renderer(ledger, tokenizer="heuristic").render(sid, CLIP, budget=6_000)
    shown = [m.sources for m in context.messages if m.kind == "summary"]
    assert shown == [(3, 14), (51, 62), (63, 74)]
    assert context.tokens <= 6_000


def test_a_policy_without_it_renders_as_it_was_recorded():
    """Off (policies recorded before the option): the four batches are shown, and here they cannot fit."""
    earlier = CLIP.model_copy(update={"summary": CLIP.summary.model_copy(update={"clip_within_room": False})})
    assert "clip_within_room" not in earlier.fingerprint()
    ledger, sid = _session()
    with pytest.raises(contextledger.PinnedOverBudgetError):
        Renderer(ledger, tokenizer="heuristic").render(sid, earlier, budget=6_000)
