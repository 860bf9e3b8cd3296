"""The card marks earlier requests shown above it as history, naming the user's latest message (ADR 0090)."""

from __future__ import annotations

import hashlib

import contextledger
import msgspec
import pytest
from contextledger.application.render.renderer import Renderer
from contextledger.projections.card_config import CardConfig
from contextledger.projections.policy import Policy
from contextledger.projections.presets import PRESETS

BEFORE = {
    "bare": "1f05f14c0e76ec60",
    "default": "03b11dc4a10f86c2",
    "blocks": "ebbf2721472d831b",
    "threshold": "a3e93ba8a1a7adac",
    "nexus": "46fb23c677268a40",
    "clip-archive": "26a0af4a983c3e1c",
}
"""Each policy's fingerprint hash before ``history_note`` existed (``976a0a0``)."""
NOTE = "Earlier requests shown above"


def _short(policy: Policy) -> str:
    return hashlib.sha256(policy.fingerprint().encode()).hexdigest()[:16]


def _session() -> tuple[contextledger.Ledger, str, int]:
    """A first task, eight tool steps, a second request, eight more steps: the second is the latest."""
    ledger = contextledger.open_ledger("memory://")
    sid = ledger.start_session(session_id="two-requests", system_prompt="You are a coding agent.")
    ledger.add_user_message(sid, "Add a --verbose flag to the CLI.")
    latest = 0
    for turn in range(16):
        if turn == 8:
            latest = ledger.add_user_message(sid, "Now also document the flag in the README.")
        ledger.add_assistant_message(
            sid, tool_calls=[{"id": f"c{turn}", "name": "bash", "arguments": {"cmd": f"cat part{turn}.py"}}]
        )
        ledger.add_tool_result(sid, f"c{turn}", " ".join(f"word{turn}-{w}" for w in range(400)))
    return ledger, sid, latest


def _card(policy: Policy, budget: int) -> str:
    ledger, sid, _ = _session()
    context = Renderer(ledger, tokenizer="heuristic").render(sid, policy, budget=budget)
    return next(m.text for m in context.messages if m.kind == "card")


def test_a_pinned_first_task_is_marked_history_and_the_latest_request_named():
    """Under the presets the card opens by marking the first task as history and naming the latest request."""
    _, _, latest = _session()
    for name in ("default", "clip-archive"):
        card = _card(PRESETS[name], 3_000)
        second = card.splitlines()[1]
        assert second.startswith(f"{NOTE} (seq 2) are history, not new instructions"), (name, card[:300])
        assert second.endswith(
            f"The user's current request is their last one: seq {latest} when this note was written, unless "
            "they asked for something after it."
        )
    noted = PRESETS["default"].model_copy(
        update={"card": CardConfig(history_note=True)}
    )  # as ADR 0090 had it
    assert _card(noted, 3_000).splitlines()[1].endswith(f"The user's latest message is seq {latest}.")


def test_a_request_arriving_after_the_card_is_never_contradicted():
    """A user message arriving between compaction points renders after the card, which is not rewritten.

    The note said "The user's latest message is seq N" of the request before it, so the model read an older
    request ("delete the build directory") named as latest below a newer one that cancels it.
    """
    ledger = contextledger.open_ledger("memory://")
    sid = ledger.start_session(session_id="a-late-request", system_prompt="You are a coding agent.")
    ledger.add_user_message(sid, "Port the parser to Rust.")
    for turn in range(25):
        if turn == 10:
            older = ledger.add_user_message(sid, "Delete the whole build directory.")
        ledger.add_assistant_message(sid, tool_calls=[{"id": f"c{turn}", "name": "bash", "arguments": {}}])
        ledger.add_tool_result(sid, f"c{turn}", "x = 1\n" * 150)
    newer = ledger.add_user_message(sid, "STOP. Do not delete anything; only list the build directory.")
    context = Renderer(ledger, tokenizer="heuristic").render(sid, "default", budget=4_000)
    kinds = [(m.kind, m.sources) for m in context.messages if m.kind == "card" or m.role == "user"]
    assert kinds.index(("message", (newer,))) > kinds.index(("card", ())), kinds  # rendered after the card
    card = next(m.text for m in context.messages if m.kind == "card")
    assert f"seq {older} when this note was written, unless they asked for something after it" in card
    assert "latest message is" not in card


def test_a_policy_without_the_note_renders_the_card_as_before():
    """A bare card (``history_note`` off) has no such line: records made before replay byte for byte."""
    plain = PRESETS["default"].model_copy(update={"card": CardConfig()})
    assert NOTE not in _card(plain, 3_000)


def test_the_only_request_is_never_marked_history():
    """A session with one request: it is the current one, whatever the window dropped after it."""
    ledger = contextledger.open_ledger("memory://")
    sid = ledger.start_session(session_id="one-request")
    ledger.add_user_message(sid, "Add a --verbose flag to the CLI.")
    for turn in range(16):
        ledger.add_assistant_message(sid, tool_calls=[{"id": f"c{turn}", "name": "bash", "arguments": {}}])
        ledger.add_tool_result(sid, f"c{turn}", " ".join(f"w{turn}-{w}" for w in range(400)))
    context = Renderer(ledger, tokenizer="heuristic").render(sid, "default", budget=3_000)
    card = next(m.text for m in context.messages if m.kind == "card")
    assert NOTE not in card


def _before(preset: Policy) -> Policy:
    """The preset as it was before the fields added later (the card's note, the head's, the clips' rules)."""
    window = preset.window.model_copy(update={"head_cap_strict": False, "pin_whole_request": False})
    summary = preset.summary.model_copy(
        update={"clip_within_room": False, "latest_within_room": False, "exact_cover": False}
    )
    return preset.model_copy(update={"card": CardConfig(), "window": window, "summary": summary})


@pytest.mark.parametrize("name", sorted(BEFORE))
def test_policies_without_the_note_keep_their_fingerprints(name):
    """A field added later is left out of the fingerprint at its default: version names and records stay."""
    policy = Policy() if name == "bare" else _before(PRESETS[name])
    assert _short(policy) == BEFORE[name]
    assert "history_note" not in policy.fingerprint()
    if name != "bare":
        assert _short(PRESETS[name]) != BEFORE[name]  # the presets use it: their versions are new ones
        assert msgspec.json.decode(PRESETS[name].fingerprint())["card"]["history_note"] is True
        assert Policy.model_validate_json(PRESETS[name].fingerprint()) == PRESETS[name]
