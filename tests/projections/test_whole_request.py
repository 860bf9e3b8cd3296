"""The current request is pinned whole: every user message since the assistant's last reply (ADR 0096)."""

from __future__ import annotations

import contextledger
import pytest
from contextledger.application.render.renderer import Renderer
from contextledger.projections.presets import PRESETS

SPEC = "Spec for the invoice API:\n" + "\n".join(
    f"- field f{i:02d} is int64 cents in column c{i:02d}" for i in range(25)
)


def _split_request(ledger: contextledger.Ledger) -> str:
    """A first task and a step; then a spec and "implement it" with no reply between; twenty steps."""
    sid = ledger.start_session(system_prompt="You are a coding agent.", tools=[{"name": "bash"}])
    ledger.add_user_message(sid, "Set up the project.")
    ledger.add_assistant_message(
        sid, "setting up", tool_calls=[{"id": "c100", "name": "bash", "arguments": {}}]
    )
    ledger.add_tool_result(sid, "c100", "q " * 300)
    ledger.add_user_message(sid, SPEC)
    ledger.add_user_message(sid, "Implement the spec above now.")
    for i in range(20):
        ledger.add_assistant_message(
            sid, f"s{i}", tool_calls=[{"id": f"c{i}", "name": "bash", "arguments": {}}]
        )
        ledger.add_tool_result(sid, f"c{i}", "q " * 300)
    return sid


def _request_pinned(renderer: Renderer, sid: str, preset) -> tuple[set[int], int, int]:
    """The positions pinned as the latest request at 4,000 tokens, their tokens, and one message's cap."""
    context = renderer.render(sid, preset, budget=4_000)
    assert context.tokens <= 4_000
    pinned = {
        p
        for d in context.decisions
        if d.action == "pinned" and d.rule == "latest-user"
        for p in range(d.first, d.last + 1)
    }
    held = sum(m.tokens for m in context.messages if set(m.sources) & pinned)
    return pinned, held, renderer.projector(preset, budget=4_000).budget.message_tokens


@pytest.mark.parametrize("preset", list(PRESETS))
def test_a_request_sent_as_two_user_messages_keeps_its_first_part(preset):
    """Only the latest message was pinned: the spec before "implement it" was dropped within a few steps.

    Peers' complaint claude-code#22376 (compaction drops parts of the user's latest multi-step request).
    """
    ledger = contextledger.open_ledger("memory://")
    sid = _split_request(ledger)
    context = Renderer(ledger, tokenizer="heuristic").render(sid, PRESETS[preset], budget=4_000)
    texts = [m.text for m in context.messages]
    assert SPEC in texts
    assert "Implement the spec above now." in texts
    assert context.tokens <= 4_000


def test_a_later_request_releases_the_earlier_ones_messages():
    """Once the assistant replied and the user asked anew, the earlier request is no longer pinned."""
    ledger = contextledger.open_ledger("memory://")
    sid = _split_request(ledger)
    ledger.add_user_message(sid, "Now write the docs.")
    for i in range(20, 40):
        ledger.add_assistant_message(
            sid, f"s{i}", tool_calls=[{"id": f"c{i}", "name": "bash", "arguments": {}}]
        )
        ledger.add_tool_result(sid, f"c{i}", "q " * 300)
    context = Renderer(ledger, tokenizer="heuristic").render(sid, PRESETS["threshold"], budget=4_000)
    texts = [m.text for m in context.messages]
    assert "Now write the docs." in texts
    assert SPEC not in texts


def test_without_the_field_the_first_part_leaves_as_recorded_before():
    """Policies recorded before ADR 0096 render as they did; the field is out of their fingerprint."""
    preset = PRESETS["default"]
    before = preset.model_copy(
        update={"window": preset.window.model_copy(update={"pin_whole_request": False})}
    )
    assert "pin_whole_request" not in before.fingerprint()
    ledger = contextledger.open_ledger("memory://")
    sid = _split_request(ledger)
    context = Renderer(ledger, tokenizer="heuristic").render(sid, before, budget=4_000)
    assert SPEC not in [m.text for m in context.messages]


def test_a_run_of_user_messages_with_no_reply_pins_at_most_one_messages_cap():
    """Thousands of appends with no reply (a writer's, a log of notes) pinned them all: the render failed.

    The request is pinned whole only while it fits one message's cap; past it, from the message that
    passed it on.
    """
    ledger = contextledger.open_ledger("memory://")
    sid = ledger.start_session(system_prompt="notes")
    for n in range(600):
        ledger.add_user_message(sid, f"note {n}: " + "word " * 12)
    renderer = Renderer(ledger, tokenizer="heuristic")
    for preset in PRESETS.values():
        pinned, held, cap = _request_pinned(renderer, sid, preset)
        assert 1 < len(pinned) < 600
        assert held <= cap


def test_notes_in_the_users_place_inside_a_request_count_toward_its_cap():
    """Forty ``is_meta`` notes between a request's messages were pinned with it but never counted.

    The pinned request passed one message's cap and the render failed (``PinnedOverBudgetError``) where
    the session renders with the field off. Found by a review of the change.
    """
    ledger = contextledger.open_ledger("memory://")
    sid = ledger.start_session(system_prompt="s")
    ledger.add_user_message(sid, "first task")
    ledger.add_assistant_message(sid, "ok")
    ledger.add_user_message(sid, "part one of the request")
    for n in range(40):
        ledger.append(
            sid, {"role": "user", "content": f"note {n}: " + "caveat " * 70, "meta": {"is_meta": True}}
        )
    ledger.add_user_message(sid, "the last part " + "word " * 900)
    renderer = Renderer(ledger, tokenizer="heuristic")
    for preset in PRESETS.values():
        _, held, cap = _request_pinned(renderer, sid, preset)
        assert held <= cap
