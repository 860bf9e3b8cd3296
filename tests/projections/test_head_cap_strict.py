"""The keep_first head stays within its cap when tool results arrive (``head_cap_strict``, ADR 0092)."""

from __future__ import annotations

import contextledger
import pytest
from contextledger.domain.content import InlineText
from contextledger.domain.events import (
    AnyEvent,
    AssistantMessageAdded,
    SessionStarted,
    ToolCall,
    ToolResultRecorded,
    UserMessageAdded,
)
from contextledger.projections.counting import CountedEvent
from contextledger.projections.fold import Projector
from contextledger.projections.policy import Policy
from contextledger.projections.presets import PRESETS
from contextledger.projections.wire import MESSAGE_OVERHEAD
from contextledger.testing import check_anthropic_pairing
from hypothesis import given
from projection_helpers import count_all, policies, sessions, words
from test_properties import COMMON, WORDS

from tests.application.agent.replies import messages_reply

TOOL = {"name": "read_file", "parameters": {"type": "object"}}


def _first_step_reads_five_files(policy: object, budget: int = 8_000) -> contextledger.AgentContext:
    """A task whose first reply reads five files in parallel, each about a fifth of the budget."""
    ledger = contextledger.open_ledger("memory://")
    agent = contextledger.AgentContext.start(
        ledger,
        provider="anthropic",
        budget=budget,
        policy=policy,
        system_prompt="You review code.",
        tools=[TOOL],
    )
    agent.add_user_message("Review modules m0..m4")
    request = agent.request()
    blocks = [
        {"type": "tool_use", "id": f"toolu_{i}", "name": "read_file", "input": {"path": f"m{i}"}}
        for i in range(5)
    ]
    for call in agent.record_response(request.call_id, messages_reply(0, blocks)):
        agent.record_tool_result(call.id, "token " * (budget // 5))
    return agent


@pytest.mark.parametrize("preset", ["default", "blocks", "clip-archive"])
def test_large_parallel_results_in_the_first_step_do_not_jam_the_session(preset):
    """The step joined the head when its call arrived; its results took the head past its cap.

    The group stayed pinned as head, so every later request raised ``PinnedOverBudgetError``, new user
    messages or not. Now it leaves the head and is cut like any other group; the task stays pinned.
    """
    agent = _first_step_reads_five_files(preset)
    for _ in range(2):
        request = agent.request()
        assert request.tokens <= 8_000
        assert not check_anthropic_pairing(request.arguments)
        assert "Review modules m0..m4" in str(request.arguments["messages"][0])
        agent.add_user_message("Go on with what fits.")


def test_a_policy_without_it_renders_as_it_was_recorded():
    """A policy recorded before the option keeps its fingerprint and its renders (its calls still replay)."""
    earlier = PRESETS["default"].model_copy(
        update={"window": PRESETS["default"].window.model_copy(update={"head_cap_strict": False})}
    )
    assert "head_cap_strict" not in earlier.fingerprint()
    assert "head_cap_strict" in PRESETS["default"].fingerprint()
    agent = _first_step_reads_five_files(earlier)
    with pytest.raises(contextledger.PinnedOverBudgetError):
        agent.request()


@COMMON
@given(session=sessions(), policy=policies())
def test_the_head_never_holds_more_than_its_cap(session, policy):
    """With ``head_cap_strict``, the head's groups sum to at most ``head_cap`` and lead the window."""
    strict = policy.model_copy(update={"window": policy.window.model_copy(update={"head_cap_strict": True})})
    projector = Projector(strict, WORDS)
    state = projector.start()
    for counted in count_all(session, WORDS):
        state = projector.evolve(state, counted)
        heads = [g.head for g in state.window.groups]
        assert heads == sorted(heads, reverse=True), "a head group after a group outside the head"
        assert sum(g.tokens for g in state.window.groups if g.head) <= projector.budget.head_tokens


def _two_calls_then_short_user_messages() -> list[CountedEvent]:
    """Hypothesis' counterexample: a first step of two small results, then eleven one-word user messages."""
    calls = (
        ToolCall(id="call_1", name="read_file", arguments="{}"),
        ToolCall(id="call_2", name="search", arguments="{}"),
    )
    session: list[tuple[int, AnyEvent]] = [
        (1, SessionStarted(session_id="s", system_prompt="", tools=())),
        (2, AssistantMessageAdded(content=None, tool_calls=calls)),
        (3, ToolResultRecorded(call_id="call_1", tool_name="read_file", content=InlineText(words(6, "r3_")))),
        (4, ToolResultRecorded(call_id="call_2", tool_name="search", content=InlineText(words(8, "r4_")))),
    ]
    session += [(seq + 1, UserMessageAdded(content=InlineText(words(1, f"u{seq}_")))) for seq in range(4, 15)]
    return count_all(session, WORDS)


def test_a_cap_smaller_than_the_cut_marker_does_not_grow_the_head():
    """The cap (13 tokens) is smaller than the cut's marker: the "cut" form of an 8-word result was longer.

    Carried as the result's short form, it replaced the result at the first compaction point: the head
    group grew from 61 to 67 tokens past its 66-token cap, unaccounted. A cut no shorter is not carried.
    """
    policy = Policy.parse(
        {
            "name": "random",
            "budget": {
                "total": 250,
                "output_reserve": 0,
                "injection_reserve": 16,
                "safety_margin": 20,
                "high_water": 1.0,
                "low_water": 1.0,
                "head_cap": 0.3125,
                "message_cap": 0.0625,
            },
            "retention": {"enabled": False},
            "truncation": {"enabled": False},
            "summary": {"mode": "latest", "clip_first": 0, "clip_last": 1},
            "window": {"keep_first": 1, "keep_first_unit": "turns", "head_cap_strict": True},
            "card": {"enabled": False},
        }
    )
    projector = Projector(policy, WORDS)
    state = projector.start()
    for counted in _two_calls_then_short_user_messages():
        state = projector.evolve(state, counted)
        for group in state.window.groups:
            assert all(
                e.short_text is None or e.short_tokens + MESSAGE_OVERHEAD < e.tokens for e in group.entries
            )
    assert state.compactions > 0, "the session reached a compaction point"
    head = [g for g in state.window.groups if g.head]
    assert [g.start for g in head] == [2]
    assert sum(g.tokens for g in head) == state.head_tokens <= projector.budget.head_tokens
