"""Wire rules the real APIs hold that a probe of the agent loop found broken: payloads and checkers."""

from __future__ import annotations

import contextledger
import pytest
from contextledger.testing import check_openai_structure

TOOLS = [{"name": "run", "input_schema": {"type": "object"}}]


def _reply(*blocks: dict) -> dict:
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "c", "content": list(blocks)}


def _sent_back(*thinking: dict) -> list[dict]:
    """The assistant message sent back after a reply of ``thinking`` blocks and one call."""
    ledger = contextledger.open_ledger("memory://")
    agent = contextledger.AgentContext.start(ledger, provider="anthropic", budget=8_000, tools=TOOLS)
    agent.add_user_message("go")
    request = agent.request()
    use = {"type": "tool_use", "id": "toolu_9", "name": "run", "input": {}}
    (call,) = agent.record_response(request.call_id, _reply(*thinking, use))
    agent.record_tool_result(call.id, "ok")
    return agent.request().arguments["messages"][1]["content"]


def test_an_unsigned_thinking_block_is_not_sent_back_with_a_null_signature():
    """A compatible server's unsigned thinking went back as ``"signature": null``, which the API refuses.

    Beside a signed block, the unsigned text must not join the signed one: that breaks its signature.
    """
    assert [b["type"] for b in _sent_back({"type": "thinking", "thinking": "x"})] == ["tool_use"]
    signed = {"type": "thinking", "thinking": "x", "signature": "s1"}
    blocks = _sent_back(signed, {"type": "thinking", "thinking": "y"})
    assert blocks[0] == signed
    assert [b["type"] for b in blocks] == ["thinking", "tool_use"]


@pytest.mark.parametrize("content", [0, False, [], {}, b""])
def test_a_falsy_result_that_is_not_text_is_refused_like_any_other(content):
    """``0`` (an exit code), ``False``, ``[]``: stored as "" where ``1`` or ``["x"]`` were refused."""
    ledger = contextledger.open_ledger("memory://")
    agent = contextledger.AgentContext.start(ledger, provider="anthropic", budget=8_000, tools=TOOLS)
    agent.add_user_message("go")
    request = agent.request()
    use = {"type": "tool_use", "id": "toolu_1", "name": "run", "input": {}}
    (call,) = agent.record_response(request.call_id, _reply(use))
    with pytest.raises(contextledger.InvalidMessageError):
        agent.record_tool_result(call.id, content)
    assert agent.record_tool_result(call.id, None)  # None is no output: an empty text


def test_the_chat_checker_accepts_content_parts_and_refuses_empty_ones():
    """A user's image parts, a tool's or system's text parts are valid Chat Completions content."""
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    text = [{"type": "text", "text": "hello"}]
    payload = {
        "messages": [
            {"role": "system", "content": text},
            {"role": "user", "content": [*text, image]},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function"}]},
            {"role": "tool", "tool_call_id": "c1", "content": text},
        ]
    }
    assert check_openai_structure(payload) == []
    payload["messages"][1]["content"] = []
    payload["messages"][3]["content"] = [image]
    assert [(p.kind, p.message) for p in check_openai_structure(payload)] == [
        ("empty_content", 1),
        ("empty_content", 3),
    ]


@pytest.mark.parametrize("provider", ["openai", "anthropic", "openai-responses"])
@pytest.mark.parametrize("name", ["fs.read", "github/create_issue", "with space", "x" * 65])
def test_a_tool_name_the_apis_refuse_is_refused_before_any_session_starts(provider, name):
    """MCP allows dots in tool names; both APIs refuse them: the first model call got a 400 back."""
    ledger = contextledger.open_ledger("memory://")
    tools = [{"name": name, "description": "d", "inputSchema": {"type": "object"}}]  # an MCP Tool's shape
    with pytest.raises(contextledger.InvalidMessageError, match="refused by the model APIs"):
        contextledger.AgentContext.start(ledger, provider=provider, budget=8_000, tools=tools)
    assert ledger.sessions() == []
    good = [{"name": "fs_read-2", "description": "d", "inputSchema": {"type": "object"}}]
    assert contextledger.AgentContext.start(ledger, provider=provider, budget=8_000, tools=good).session_id
