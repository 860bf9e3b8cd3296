"""The agent-loop API: requests in each provider's shape, SDK replies as returned, results either way."""

from __future__ import annotations

import json
from typing import Any

import contextledger
import msgspec
import pytest
from anthropic.types import Message
from contextledger.application.kernel.messages import (
    AssistantMessage,
    ToolResult,
    parse_message,
    parse_messages,
)
from contextledger.domain.errors import BudgetError, InvalidMessageError
from contextledger.domain.events import AssistantMessageAdded, SessionStarted, ToolResultRecorded
from contextledger.testing import (
    check_anthropic_pairing,
    check_anthropic_structure,
    check_openai_pairing,
    check_openai_structure,
)
from openai.types.chat import ChatCompletion

OPENAI_TOOL = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        "strict": False,
    },
}
ANTHROPIC_TOOL = {
    "name": "run",
    "description": "Run a command",
    "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
}


def chat_completion(content: str | None, calls: list[tuple[str, str, dict[str, Any]]]) -> ChatCompletion:
    """A ``ChatCompletion`` object as the openai SDK returns it."""
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    if calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, n, a in calls
        ]
    return ChatCompletion.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-test",
            "choices": [{"index": 0, "finish_reason": "tool_calls" if calls else "stop", "message": message}],
            "usage": {
                "prompt_tokens": 120,
                "completion_tokens": 9,
                "total_tokens": 129,
                "prompt_tokens_details": {"cached_tokens": 64},
            },
        }
    )


def anthropic_message(blocks: list[dict[str, Any]]) -> Message:
    """A ``Message`` object as the anthropic SDK returns it."""
    return Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": blocks,
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 20, "cache_read_input_tokens": 100, "output_tokens": 8},
        }
    )


def test_start_session_takes_openai_and_anthropic_tool_schemas(ledger: contextledger.Ledger) -> None:
    """Both providers' tool schemas are stored in the ledger's shape (strict kept, cache_control dropped)."""
    session = ledger.start_session(
        tools=[OPENAI_TOOL, {**ANTHROPIC_TOOL, "cache_control": {"type": "ephemeral"}}]
    )
    started = ledger.events(session)[0].event
    assert isinstance(started, SessionStarted)
    assert [(t.name, t.description, t.parameters["properties"]) for t in started.tools] == [
        ("read_file", "Read a file", {"path": {"type": "string"}}),
        ("run", "Run a command", {"command": {"type": "string"}}),
    ]
    assert [t.strict for t in started.tools] == [False, msgspec.UNSET]


def test_the_append_api_takes_provider_shaped_messages(ledger: contextledger.Ledger) -> None:
    """An OpenAI tool_calls message and tool message, and an Anthropic tool_use block, append as they come."""
    session = ledger.start_session(
        tools=[OPENAI_TOOL, ANTHROPIC_TOOL], messages=[{"role": "user", "content": "go"}]
    )
    ledger.append(
        session,
        {
            "role": "assistant",
            "content": None,
            "refusal": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
            ],
        },
    )
    ledger.append(
        session, {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "data"}]}
    )
    ledger.append(
        session,
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "run", "input": {"command": "ls"}}],
        },
    )
    ledger.append(
        session, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}
    )
    events = [r.event for r in ledger.events(session)]
    results = [e for e in events if isinstance(e, ToolResultRecorded)]
    assert [(r.call_id, r.tool_name, ledger.text(r.content)) for r in results] == [
        ("c1", "read_file", "data"),
        ("t1", "run", "ok"),
    ]
    calls = [c for e in events if isinstance(e, AssistantMessageAdded) for c in e.tool_calls]
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("c1", "read_file", "{}"),
        ("t1", "run", '{"command":"ls"}'),
    ]


def test_an_anthropic_user_message_of_several_results_parses_to_several() -> None:
    """Several tool_result blocks are several tool results (parse_messages); parse_message says so."""
    raw = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "a", "content": [{"type": "text", "text": "1"}]},
            {"type": "tool_result", "tool_use_id": "b", "content": "boom", "is_error": True},
            {"type": "text", "text": "and now?"},
        ],
    }
    parsed = parse_messages(raw)
    assert [type(m).__name__ for m in parsed] == ["ToolResult", "ToolResult", "UserMessage"]
    assert isinstance(parsed[1], ToolResult)
    assert parsed[1].is_error
    with pytest.raises(InvalidMessageError, match="holds 3 messages"):
        parse_message(raw)


def test_non_text_blocks_and_unknown_keys_are_still_refused() -> None:
    """The boundary converts provider shapes; it refuses audio, sourceless images and stray fields."""
    with pytest.raises(InvalidMessageError, match="source of type None is not accepted"):
        parse_message({"role": "user", "content": [{"type": "image", "source": {}}]})
    with pytest.raises(InvalidMessageError, match="not 'input_audio'"):
        parse_message({"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]})
    with pytest.raises(InvalidMessageError):
        parse_message({"role": "assistant", "content": "x", "colour": "blue"})


def test_a_thinking_reply_keeps_reasoning_and_signature() -> None:
    """One signed Anthropic thinking block becomes reasoning with its signature."""
    message = parse_message(
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "plan", "signature": "SIG"},
                {"type": "text", "text": "answer"},
            ],
        }
    )
    assert isinstance(message, AssistantMessage)
    assert (message.content, message.reasoning, message.reasoning_signature) == ("answer", "plan", "SIG")
    assert message.meta == {}


def test_interleaved_and_redacted_thinking_go_back_exactly(ledger: contextledger.Ledger) -> None:
    """Several thinking blocks and a redacted one are kept as sent and lead their turn's message again."""
    agent = contextledger.AgentContext.start(ledger, provider="anthropic", tools=[ANTHROPIC_TOOL])
    agent.add_user_message("go")
    request = agent.request()
    thinking = [
        {"type": "thinking", "thinking": "first", "signature": "S1"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "thinking", "thinking": "second", "signature": "S2"},
    ]
    blocks = [*thinking, {"type": "tool_use", "id": "toolu_1", "name": "run", "input": {}}]
    agent.record_response(request.call_id, anthropic_message(blocks))
    stored = next(
        r.event for r in ledger.events(agent.session_id) if isinstance(r.event, AssistantMessageAdded)
    )
    assert stored.reasoning == "first\n\nsecond"
    assert stored.reasoning_signature is None
    agent.record_tool_result("toolu_1", "ok")
    payload = agent.request().arguments
    assert payload["messages"][1]["content"][:3] == thinking
    assert not check_anthropic_pairing(payload)


def test_openai_loop_with_sdk_objects_records_reply_usage_and_results(ledger: contextledger.Ledger) -> None:
    """A ChatCompletion object is stored as the reply, usage joins the audit record, a reused id pairs."""
    agent = contextledger.AgentContext.start(
        ledger, provider="openai", system_prompt="sys", tools=[OPENAI_TOOL]
    )
    agent.add_user_message({"role": "user", "content": "read twice"})
    for turn in range(2):
        request = agent.request()
        assert not check_openai_pairing(request.arguments)
        assert not check_openai_structure(request.arguments)
        reply = chat_completion(None, [("call_1", "read_file", {"path": f"f{turn}"})])  # the id reused
        calls = agent.record_response(request.call_id, reply, latency_ms=42.0)
        assert [(c.id, c.name, c.input) for c in calls] == [("call_1", "read_file", {"path": f"f{turn}"})]
        agent.record_tool_result({"role": "tool", "tool_call_id": "call_1", "content": f"text {turn}"})
    last = agent.request()
    assert not check_openai_pairing(last.arguments)
    agent.record_response(last.call_id, chat_completion("done", []))
    views = agent.recorder.calls(agent.session_id)
    assert len(views) == 3
    assert views[-1].record.call_id == last.call_id
    usage = views[0].usage
    assert usage is not None
    assert (usage.input_tokens, usage.cached_tokens, usage.output_tokens, usage.latency_ms, usage.model) == (
        120,
        64,
        9,
        42.0,
        "gpt-test",
    )
    replies = [
        e for e in (r.event for r in ledger.events(agent.session_id)) if isinstance(e, AssistantMessageAdded)
    ]
    assert [ledger.text(r.content) if r.content else None for r in replies] == [None, None, "done"]
    assert replies[-1].model == "gpt-test"


def test_recording_the_same_reply_or_result_twice_stores_it_once(ledger: contextledger.Ledger) -> None:
    """Idempotency keys derived from the call ids make a retried record a no-op."""
    agent = contextledger.AgentContext.start(
        ledger, tools=[OPENAI_TOOL], messages=[{"role": "user", "content": "x"}]
    )
    request = agent.request()
    reply = chat_completion(None, [("c9", "read_file", {})])
    agent.record_response(request.call_id, reply)
    agent.record_response(request.call_id, reply)
    first = agent.record_tool_result("c9", "out")
    again = agent.record_tool_result("c9", "out")
    assert first == again
    kinds = [type(r.event).__name__ for r in ledger.events(agent.session_id)]
    assert kinds.count("AssistantMessageAdded") == 1
    assert kinds.count("ToolResultRecorded") == 1


def test_a_second_different_result_for_a_call_is_a_duplicate_result(ledger: contextledger.Ledger) -> None:
    """A second, different result for an answered call is ``DuplicateToolResultError``.

    The key derived from the call's reply refused the new text as "different content": the user never gave
    a key, and the advice ("use a new key") was wrong.
    """
    agent = contextledger.AgentContext.start(
        ledger, tools=[OPENAI_TOOL], messages=[{"role": "user", "content": "x"}]
    )
    request = agent.request()
    agent.record_response(
        request.call_id, chat_completion(None, [("c8", "read_file", {}), ("c9", "read_file", {})])
    )
    agent.record_tool_result("c9", "out")
    with pytest.raises(contextledger.DuplicateToolResultError, match="c9"):
        agent.record_tool_result("c9", "other")
    agent.record_tool_result("c8", "out", idempotency_key="mine")
    with pytest.raises(contextledger.IdempotencyKeyReusedError):  # a key the caller gave stays the caller's
        agent.record_tool_result("c8", "other", idempotency_key="mine")


def test_anthropic_thinking_is_sent_back_first_in_its_turn_and_not_after(
    ledger: contextledger.Ledger,
) -> None:
    """The signed thinking block leads the assistant message of the current tool-use turn only."""
    agent = contextledger.AgentContext.start(
        ledger, provider="anthropic", system_prompt="sys", tools=[ANTHROPIC_TOOL]
    )
    agent.add_user_message("list files")
    request = agent.request()
    reply = anthropic_message(
        [
            {"type": "thinking", "thinking": "I will run ls", "signature": "SIG-1"},
            {"type": "text", "text": "Running."},
            {"type": "tool_use", "id": "toolu_1", "name": "run", "input": {"command": "ls"}},
        ]
    )
    calls = agent.record_response(request.call_id, reply)
    usage = agent.recorder.call(agent.session_id, request.call_id).usage
    assert usage is not None
    assert (usage.input_tokens, usage.cached_tokens) == (120, 100)
    agent.record_tool_result({"type": "tool_result", "tool_use_id": calls[0].id, "content": "a b"})
    payload = agent.request().arguments
    assert not check_anthropic_pairing(payload)
    assert not check_anthropic_structure(payload)
    assistant = payload["messages"][1]
    assert assistant["content"][0] == {"type": "thinking", "thinking": "I will run ls", "signature": "SIG-1"}
    assert [b["type"] for b in assistant["content"]] == ["thinking", "text", "tool_use"]
    agent.add_user_message("thanks")
    later = agent.request().arguments
    assert "thinking" not in json.dumps(later)


def test_reasoning_sent_back_is_counted_within_the_budget(ledger: contextledger.Ledger) -> None:
    """Long signed thinking shrinks the render so context plus thinking stays within the budget."""
    budget = 2_000
    agent = contextledger.AgentContext.start(
        ledger, provider="anthropic", budget=budget, system_prompt="sys", tools=[ANTHROPIC_TOOL]
    )
    for turn in range(12):
        agent.add_user_message(f"turn {turn}: " + "words " * 60)
        agent.record_response(
            agent.request().call_id, anthropic_message([{"type": "text", "text": "ok " * 40}])
        )
    agent.add_user_message("now run it")
    request = agent.request()
    thought = "deliberate " * 500
    blocks = [
        {"type": "thinking", "thinking": thought, "signature": "S"},
        {"type": "tool_use", "id": "toolu_9", "name": "run", "input": {"command": "ls"}},
    ]
    agent.record_response(request.call_id, anthropic_message(blocks))
    agent.record_tool_result("toolu_9", "out")
    final = agent.request()
    extra = agent.renderer.counter.count(
        json.dumps(final.arguments["messages"][-2]["content"][0], separators=(",", ":"))
    )
    assert final.arguments["messages"][-2]["content"][0]["type"] == "thinking"
    assert final.tokens + extra <= budget


def test_thinking_that_cannot_fit_is_a_budget_error(ledger: contextledger.Ledger) -> None:
    """Signed thinking larger than the whole budget cannot be sent: a typed BudgetError."""
    agent = contextledger.AgentContext.start(
        ledger, provider="anthropic", budget=1_000, tools=[ANTHROPIC_TOOL]
    )
    agent.add_user_message("go")
    request = agent.request()
    blocks = [
        {"type": "thinking", "thinking": "long " * 2_000, "signature": "S"},
        {"type": "tool_use", "id": "toolu_1", "name": "run", "input": {}},
    ]
    agent.record_response(request.call_id, anthropic_message(blocks))
    agent.record_tool_result("toolu_1", "x")
    with pytest.raises(BudgetError, match="reasoning"):
        agent.request()


def test_openai_responses_format_round_trip(ledger: contextledger.Ledger) -> None:
    """Responses: instructions, input items paired by call_id, encrypted reasoning sent back, usage joined."""
    agent = contextledger.AgentContext.start(
        ledger,
        provider="openai-responses",
        system_prompt="sys",
        tools=[{"type": "function", "name": "run", "parameters": {}}],
    )
    agent.add_user_message("go")
    request = agent.request()
    assert request.arguments["instructions"] == "sys"
    assert request.arguments["tools"] == [
        {"type": "function", "name": "run", "parameters": {"type": "object", "properties": {}}}
    ]
    reply = {
        "id": "resp_1",
        "model": "o-test",
        "output": [
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [{"type": "summary_text", "text": "think"}],
                "encrypted_content": "ENC",
            },
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_a",
                "name": "run",
                "arguments": '{"command":"ls"}',
            },
        ],
        "usage": {"input_tokens": 50, "input_tokens_details": {"cached_tokens": 10}, "output_tokens": 5},
    }
    (call,) = agent.record_response(request.call_id, reply)
    agent.record_tool_result({"type": "function_call_output", "call_id": call.id, "output": "a b"})
    items = agent.request().arguments["input"]
    assert items[1:] == [
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "think"}],
            "encrypted_content": "ENC",
        },
        {"type": "function_call", "call_id": "call_a", "name": "run", "arguments": '{"command":"ls"}'},
        {"type": "function_call_output", "call_id": "call_a", "output": "a b"},
    ]
    usage = agent.recorder.call(agent.session_id, request.call_id).usage
    assert usage is not None
    assert (usage.input_tokens, usage.cached_tokens, usage.output_tokens) == (50, 10, 5)


def test_an_unknown_provider_is_a_config_error(ledger: contextledger.Ledger) -> None:
    """A provider name the API does not know is refused with the list of known ones."""
    session = ledger.start_session()
    with pytest.raises(contextledger.ConfigError, match="anthropic"):
        contextledger.AgentContext(ledger, session, provider="gemini")


def test_a_reply_to_an_unknown_call_writes_nothing(ledger: contextledger.Ledger) -> None:
    """record_response checks the call id first: a typo is a ValidationError and the session is unchanged."""
    agent = contextledger.AgentContext.start(
        ledger, tools=[OPENAI_TOOL], messages=[{"role": "user", "content": "x"}]
    )
    before = ledger.version(agent.session_id)
    with pytest.raises(contextledger.ValidationError, match="no recorded call"):
        agent.record_response("call-typo", chat_completion("hi", []))
    assert ledger.version(agent.session_id) == before
