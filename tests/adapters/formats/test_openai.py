"""OpenAI Chat Completions payloads: mapping, SDK shapes, ids, refusals."""

from __future__ import annotations

import copy

import pytest
from contextledger.adapters.formats.openai import OPENAI_MAX_CALL_ID, openai_call_id, to_openai
from contextledger.adapters.formats.pairing import check_openai_pairing
from contextledger.domain.errors import InvalidMessageError
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam


def test_rich_context_maps_every_message(rich_context):
    """Message by message: system first, calls, results; summary and injection as user messages."""
    payload = to_openai(rich_context)

    assert payload["messages"] == [
        {"role": "system", "content": "You are a careful coding agent."},
        {"role": "user", "content": "Fix the failing test in a.py."},
        {"role": "user", "content": "[summary] Earlier we looked at b.py."},
        {"role": "user", "content": "Go on."},
        {
            "role": "assistant",
            "content": "Reading both.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
                },
                {"id": "call_2", "type": "function", "function": {"name": "grep", "arguments": "not json {"}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "def f(): ..."},
        {"role": "tool", "tool_call_id": "call_2", "content": "grep: bad regex"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_3", "type": "function", "function": {"name": "ls", "arguments": "[1, 2]"}}
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "call_3",
            "content": "[result expired: ls call_3, 4,812 tokens; restore: seq 1234]",
        },
        {"role": "user", "content": "Memory: the user prefers pytest."},
    ]
    assert payload["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file.",
                "parameters": {"type": "object"},
            },
        },
        {
            "type": "function",
            "function": {
                "name": "grep",
                "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}}},
            },
        },
        {"type": "function", "function": {"name": "ls", "parameters": {"type": "object", "properties": {}}}},
    ]


def test_rich_context_validates_against_the_sdk_types(rich_context, sdk):
    """Every message, every tool and the whole request conform to the openai SDK's request types."""
    payload = to_openai(rich_context)

    assert sdk.openai_errors(payload) == []
    assert check_openai_pairing(payload) == []


def test_empty_system_and_no_tools_are_omitted(neutral):
    """An empty system prompt sends no system message, and no tools sends no ``tools`` key."""
    ctx = neutral.context([neutral.message("user", "hi")], system="", tools=())

    assert to_openai(ctx) == {"messages": [{"role": "user", "content": "hi"}]}


def test_assistant_without_text_or_calls_sends_empty_content(neutral, sdk):
    """An assistant message with neither text nor calls has content "" (null is only valid with calls)."""
    ctx = neutral.context([neutral.message("user", "hi"), neutral.message("assistant", "")])
    payload = to_openai(ctx)

    assert payload["messages"][-1] == {"role": "assistant", "content": ""}
    assert sdk.openai_errors(payload) == []


def test_summary_and_injection_are_user_whatever_their_neutral_role(neutral):
    """Summaries and injections go out as user messages even when the neutral role says assistant."""
    ctx = neutral.context(
        [
            neutral.message("assistant", "the summary", kind="summary"),
            neutral.message("assistant", "a memory", kind="injection"),
        ],
        stable_prefix=1,
    )

    roles = [m["role"] for m in to_openai(ctx)["messages"]]

    assert roles == ["system", "user", "user"]


def test_long_call_ids_are_shortened_identically_on_call_and_result(neutral, sdk):
    """Ids over 40 characters are shortened deterministically, the same on the call and its result."""
    long_id = "call_" + "x" * 60
    ctx = neutral.context(
        [
            neutral.message("user", "go"),
            neutral.message("assistant", tool_calls=(neutral.call(id=long_id, name="ls", arguments="{}"),)),
            neutral.message("tool", "ok", tool_call_id=long_id),
        ]
    )
    payload = to_openai(ctx)
    sent = payload["messages"][2]["tool_calls"][0]["id"]

    assert len(sent) == OPENAI_MAX_CALL_ID
    assert payload["messages"][3]["tool_call_id"] == sent == openai_call_id(long_id)
    assert openai_call_id("call_" + "x" * 59 + "y") != sent
    assert openai_call_id("call_7") == "call_7"
    assert check_openai_pairing(payload) == []
    assert sdk.openai_errors(payload) == []


def test_error_result_is_sent_as_its_text(neutral):
    """Chat Completions has no error flag: an error result is its text, unchanged."""
    ctx = neutral.context(
        [
            neutral.message("user", "go"),
            neutral.message("assistant", tool_calls=(neutral.call(id="c1", name="ls", arguments="{}"),)),
            neutral.message("tool", "boom", tool_call_id="c1", is_error=True),
        ]
    )

    assert to_openai(ctx)["messages"][-1] == {"role": "tool", "tool_call_id": "c1", "content": "boom"}


@pytest.mark.parametrize(
    ("role", "extra", "match"),
    [
        ("tool", "", "needs a tool_call_id"),
        ("user", "tool_calls", "cannot carry tool calls"),
        ("user", "tool_call_id", "only a tool result"),
    ],
)
def test_inexpressible_messages_are_refused(neutral, role, extra, match):
    """A tool result without id, or calls and call ids on the wrong role, raise InvalidMessageError."""
    fields = {
        "": {},
        "tool_calls": {"tool_calls": (neutral.call(id="c1", name="ls", arguments="{}"),)},
        "tool_call_id": {"tool_call_id": "c1"},
    }[extra]
    ctx = neutral.context([neutral.message(role, "x", **fields)])

    with pytest.raises(InvalidMessageError, match=match):
        to_openai(ctx)


def test_payload_shares_nothing_mutable_with_the_context(rich_context):
    """Mutating a payload leaves the context (and the next payload) unchanged."""
    first = to_openai(rich_context)
    before = copy.deepcopy(first)
    first["tools"][0]["function"]["parameters"]["type"] = "array"
    first["messages"][4]["tool_calls"].clear()

    assert to_openai(rich_context) == before


@pytest.mark.parametrize(
    ("break_it", "tp"),
    [
        (lambda p: p["messages"][5].pop("tool_call_id"), ChatCompletionMessageParam),
        (lambda p: p["messages"][4]["tool_calls"][0].update(type="func"), ChatCompletionMessageParam),
        (lambda p: p["messages"][4]["tool_calls"][0]["function"].update(arguments={"a": 1}), None),
        (lambda p: p["messages"][1].update(bogus=1), ChatCompletionMessageParam),
        (lambda p: p["messages"][1].update(role="human"), ChatCompletionMessageParam),
        (lambda p: p["tools"][0]["function"].pop("name"), ChatCompletionToolParam),
        (lambda p: p["tools"][0].update(type="tool"), ChatCompletionToolParam),
    ],
)
def test_a_malformed_payload_fails_the_sdk_check(rich_context, sdk, break_it, tp):
    """The SDK check is strict enough to catch a missing key, a wrong literal, a wrong type, an extra key."""
    payload = to_openai(rich_context)
    break_it(payload)

    assert sdk.openai_errors(payload) != []
    if tp is not None:
        element = payload["messages"] if tp is ChatCompletionMessageParam else payload["tools"]
        assert any(sdk.errors(item, tp) for item in element)
