"""A call's late reply, after another reply moved the session past its context, is refused: never grafted."""

from __future__ import annotations

import contextledger
import pytest
from contextledger.testing import check_anthropic_structure

TOOLS = [{"name": "run", "input_schema": {"type": "object"}}]


def _reply(n: int, *blocks: dict, stop: str = "tool_use") -> dict:
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "model": "c",
        "content": list(blocks),
        "stop_reason": stop,
    }


def _use(call_id: str) -> dict:
    return {"type": "tool_use", "id": call_id, "name": "run", "input": {}}


def test_a_timed_out_requests_late_reply_is_refused_and_its_retry_stands():
    """r1 timed out, r2 (its retry) answered and the turn ended; then r1's reply arrived.

    It was appended after "Done.", merged by the Anthropic wire into one assistant message starting with
    text (with thinking on, a message the API refuses).
    """
    ledger = contextledger.open_ledger("memory://")
    agent = contextledger.AgentContext.start(ledger, provider="anthropic", budget=8_000, tools=TOOLS)
    agent.add_user_message("go")
    first = agent.request()
    retry = agent.request()
    (call,) = agent.record_response(
        retry.call_id, _reply(1, {"type": "text", "text": "Reading B"}, _use("toolu_B"))
    )
    agent.record_tool_result(call.id, "B contents")
    done = agent.request()
    agent.record_response(done.call_id, _reply(2, {"type": "text", "text": "Done."}, stop="end_turn"))
    head = ledger.version(agent.session_id)
    with pytest.raises(contextledger.ValidationError, match="late reply is not taken"):
        agent.record_response(
            first.call_id, _reply(3, {"type": "text", "text": "Reading A"}, _use("toolu_A"))
        )
    assert ledger.version(agent.session_id) == head
    agent.record_response(
        done.call_id, _reply(2, {"type": "text", "text": "Done."}, stop="end_turn")
    )  # a no-op
    assert ledger.version(agent.session_id) == head
    agent.add_user_message("and now?")
    assert not check_anthropic_structure(agent.request().arguments)
