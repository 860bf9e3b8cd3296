"""A reply cut off by ``max_tokens`` inside a tool call: recorded whole, never run with made-up arguments."""

from __future__ import annotations

import contextledger
import pytest
from contextledger.testing import check_anthropic_pairing, check_anthropic_structure

TOOLS = [{"name": "run", "input_schema": {"type": "object", "properties": {"cmd": {"type": "string"}}}}]
PARTIAL = '{"cmd": "cat > big.py <<EOF\\nimport o'

CUT_STREAM = [
    {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-x",
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": 50, "output_tokens": 1},
        },
    },
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Writing it."}},
    {"type": "content_block_stop", "index": 0},
    {
        "type": "content_block_start",
        "index": 1,
        "content_block": {"type": "tool_use", "id": "toolu_1", "name": "run", "input": {}},
    },
    {
        "type": "content_block_delta",
        "index": 1,
        "delta": {"type": "input_json_delta", "partial_json": PARTIAL},
    },
    {"type": "content_block_stop", "index": 1},
    {"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": {"output_tokens": 4096}},
    {"type": "message_stop"},
]


def _agent(provider: str) -> contextledger.AgentContext:
    ledger = contextledger.open_ledger("memory://")
    tools = TOOLS if provider == "anthropic" else [{"type": "function", "function": {"name": "run"}}]
    agent = contextledger.AgentContext.start(ledger, provider=provider, budget=8_000, tools=tools)
    agent.add_user_message("write big.py")
    return agent


def test_a_stream_cut_inside_a_call_is_recorded_not_a_json_error():
    """The stream closes the cut block, then says ``max_tokens``: a complete reply.

    It raised an untyped ``JSONDecodeError`` mid-stream: the last three events never reached the caller,
    and the reply (4,096 output tokens, paid for) was lost.
    """
    agent = _agent("anthropic")
    request = agent.request()
    recorded = agent.record_stream(request.call_id, iter(CUT_STREAM))
    assert len(list(recorded)) == len(CUT_STREAM)
    (call,) = recorded.tool_calls
    assert call.arguments == PARTIAL  # verbatim, as it streamed
    with pytest.raises(contextledger.InvalidMessageError, match="not a JSON object"):
        _ = call.input
    agent.record_tool_result(call.id, "your call was cut off: send it again, shorter", is_error=True)
    again = agent.request()
    assert not check_anthropic_pairing(again.arguments)
    assert not check_anthropic_structure(again.arguments)
    (use,) = [b for m in again.arguments["messages"] for b in m["content"] if b["type"] == "tool_use"]
    assert isinstance(use["input"], dict)  # sent back as an object, the text kept verbatim inside


def test_cut_off_arguments_are_refused_where_none_are_an_empty_object():
    """``finish_reason`` ``length``, half the arguments: ``input`` gave ``{}``; a loop ran the tool bare."""
    agent = _agent("openai")
    request = agent.request()
    calls = [
        {"id": "call_A", "type": "function", "function": {"name": "run", "arguments": '{"cmd":"echo hel'}},
        {"id": "call_B", "type": "function", "function": {"name": "run", "arguments": ""}},
        {"id": "call_C", "type": "function", "function": {"name": "run", "arguments": "[1, 2]"}},
    ]
    message = {"role": "assistant", "content": None, "tool_calls": calls}
    reply = {
        "id": "c1",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "length"}],
    }
    cut, bare, listed = agent.record_response(request.call_id, reply)
    with pytest.raises(contextledger.InvalidMessageError, match="call_A"):
        _ = cut.input
    assert bare.input == {}
    with pytest.raises(contextledger.InvalidMessageError):
        _ = listed.input
