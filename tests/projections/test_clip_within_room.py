"""Clip-archive batches are shown within the room the pinned parts leave (``clip_within_room``, ADR 0094)."""

from __future__ import annotations

import random

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


def test_batches_shown_are_taken_out_when_no_batch_fits_any_more():
    """Pins shrink the room after two batches are shown: none fits, and the ones shown stayed.

    The reducer kept the batches already shown when its selection came back empty, so the render failed
    where it fits with summaries off (found by a review of this session's diff). They leave now, and their
    spans are named as dropped for want of room.
    """
    rng = random.Random(7)

    def words(n: int) -> str:
        return " ".join(
            rng.choice(["alpha", "beta", "gamma", "delta"]) + str(rng.randint(0, 99)) for _ in range(n)
        )

    ledger = contextledger.open_ledger("memory://")
    sid = ledger.start_session(session_id="room-shrinks", system_prompt="You are a coding agent.")
    ledger.add_user_message(sid, "Read every module.")
    ledger.add_user_message(sid, "Start now.")
    results = []

    def step(i: int) -> None:
        ledger.add_assistant_message(
            sid, f"Reading m{i}.py.", tool_calls=[{"id": f"c{i}", "name": "bash", "arguments": {}}]
        )
        results.append(ledger.add_tool_result(sid, f"c{i}", words(250)))

    for i in range(12):
        step(i)
    for first, last in ((4, 9), (10, 15)):
        ledger.record_summary(sid, covers_from=first, covers_through=last, text=words(350))
    for i in range(12, 30):
        step(i)
    renderer = Renderer(ledger, tokenizer="heuristic")
    assert [m.sources for m in renderer.render(sid, CLIP, budget=6_000).messages if m.kind == "summary"]
    for position in results[-8:-3]:
        ledger.pin(sid, position)
    context = renderer.render(sid, CLIP, budget=6_000)
    assert [m for m in context.messages if m.kind == "summary"] == []
    assert context.tokens <= 6_000
    assert any(d.rule == "summary:no-room" for d in context.decisions)
