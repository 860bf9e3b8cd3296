"""`why` of a text in signed reasoning: sent back within its tool-use turn on the wires that do, then not."""

from __future__ import annotations

import contextledger
import pytest
from contextledger.application.audit.forensics import why
from contextledger.application.audit.why_answer import TURN_ENDED
from contextledger.application.render.renderer import Renderer

from tests.application.agent.replies import messages_reply

ANTHROPIC_TOOL = {"name": "run", "input_schema": {"type": "object"}}
OPENAI_TOOL = {"type": "function", "function": {"name": "run", "parameters": {"type": "object"}}}
THOUGHT = "the ZEBRA plan is best"


def _anthropic(agent: contextledger.AgentContext, request: contextledger.AgentRequest) -> None:
    blocks = [
        {"type": "thinking", "thinking": THOUGHT, "signature": "SIG"},
        {"type": "tool_use", "id": "toolu_1", "name": "run", "input": {}},
    ]
    [call] = agent.record_response(request.call_id, messages_reply(0, blocks))
    agent.record_tool_result(call.id, "out")


def _openai(agent: contextledger.AgentContext, request: contextledger.AgentRequest) -> None:
    message = {
        "role": "assistant",
        "content": None,
        "reasoning_content": THOUGHT,
        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "run", "arguments": "{}"}}],
    }
    reply = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-test",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
    [call] = agent.record_response(request.call_id, reply)
    agent.record_tool_result(call.id, "out")


def test_thinking_sent_back_in_its_turn_is_found_there_then_left_when_the_turn_ends():
    """The thinking went back in the next request of its turn, and ``why`` said "never sent".

    The payload's reasoning is added by the wire, not the render, so the renders never held it; the calls
    of a wire that sends it back now show it as ``reasoning`` while its turn lasts, then say why it left.
    """
    ledger = contextledger.open_ledger("memory://")
    agent = contextledger.AgentContext.start(ledger, provider="anthropic", tools=[ANTHROPIC_TOOL])
    agent.add_user_message("Task: investigate")
    _anthropic(agent, agent.request())
    sent = agent.request()
    assert sent.arguments["messages"][1]["content"][0]["thinking"] == THOUGHT
    answer = why(ledger, agent.session_id, "ZEBRA plan", renderer=Renderer(ledger))
    assert answer.verdict.startswith("still in context"), answer.verdict
    assert answer.calls[-1].shown == "reasoning"
    agent.add_user_message("Now something else")
    agent.request()
    answer = why(ledger, agent.session_id, "ZEBRA plan", renderer=Renderer(ledger))
    assert (answer.calls[-1].disposition, answer.calls[-1].rule) == ("not-sent", TURN_ENDED)
    assert "within its own tool-use turn" in answer.smallest_change


@pytest.mark.parametrize("provider", ["openai"])
def test_reasoning_a_wire_never_sends_is_never_sent(provider):
    """On the Chat Completions wire reasoning never goes back: still "never sent", as before."""
    ledger = contextledger.open_ledger("memory://")
    agent = contextledger.AgentContext.start(ledger, provider=provider, tools=[OPENAI_TOOL])
    agent.add_user_message("Task: investigate")
    _openai(agent, agent.request())
    agent.request()
    answer = why(ledger, agent.session_id, "ZEBRA plan", renderer=Renderer(ledger))
    assert answer.calls[-1].disposition == "not-sent"
    assert "never sent" in answer.smallest_change
