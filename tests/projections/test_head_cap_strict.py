"""The keep_first head stays within its cap when tool results arrive (``head_cap_strict``, ADR 0092)."""

from __future__ import annotations

import contextledger
import pytest
from contextledger.projections.fold import Projector
from contextledger.projections.presets import PRESETS
from contextledger.testing import check_anthropic_pairing
from hypothesis import given
from projection_helpers import count_all, policies, sessions
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
