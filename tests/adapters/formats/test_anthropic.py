"""Anthropic Messages payloads: blocks, merging, placeholders, cache breakpoints, SDK shapes."""

from __future__ import annotations

import copy
import json

import pytest
from anthropic.types import MessageParam, TextBlockParam, ToolParam
from contextledger.adapters.formats.anthropic import (
    ANTHROPIC_MAX_CALL_ID,
    EMPTY_ERROR_RESULT,
    LEADING_USER_PLACEHOLDER,
    RAW_ARGUMENTS_KEY,
    anthropic_call_id,
    anthropic_call_ids,
    to_anthropic,
    tool_input,
)
from contextledger.adapters.formats.pairing import check_anthropic_pairing, check_anthropic_structure

EPHEMERAL = {"type": "ephemeral"}


def _breakpoints(payload):
    """Return the blocks (system, tools, message blocks) that carry cache_control, in order."""
    blocks = [*payload.get("system", []), *payload.get("tools", [])]
    blocks += [b for m in payload["messages"] for b in m["content"]]
    return [b for b in blocks if "cache_control" in b]


def _call_result(neutral, call_id="c1", text="ok", **fields):
    """An assistant call and its result, as two neutral messages."""
    return [
        neutral.message("assistant", tool_calls=(neutral.call(id=call_id, name="ls", arguments="{}"),)),
        neutral.message("tool", text, tool_call_id=call_id, **fields),
    ]


def test_rich_context_maps_to_blocks(rich_context):
    """System apart, merged user blocks, tool_use with parsed input, results in user messages, breakpoints."""
    payload = to_anthropic(rich_context)

    assert payload["system"] == [
        {"type": "text", "text": "You are a careful coding agent.", "cache_control": EPHEMERAL}
    ]
    assert payload["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Fix the failing test in a.py."},
                {"type": "text", "text": "[summary] Earlier we looked at b.py.", "cache_control": EPHEMERAL},
                {"type": "text", "text": "Go on."},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading both."},
                {"type": "tool_use", "id": "call_1", "name": "read_file", "input": {"path": "a.py"}},
                {
                    "type": "tool_use",
                    "id": "call_2",
                    "name": "grep",
                    "input": {RAW_ARGUMENTS_KEY: "not json {"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "def f(): ..."},
                {
                    "type": "tool_result",
                    "tool_use_id": "call_2",
                    "content": "grep: bad regex",
                    "is_error": True,
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "call_3", "name": "ls", "input": {RAW_ARGUMENTS_KEY: "[1, 2]"}}
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "call_3",
                    "content": "[result expired: ls call_3, 4,812 tokens; restore: seq 1234]",
                },
                {"type": "text", "text": "Memory: the user prefers pytest.", "cache_control": EPHEMERAL},
            ],
        },
    ]
    assert payload["tools"] == [
        {"name": "read_file", "description": "Read a file.", "input_schema": {"type": "object"}},
        {"name": "grep", "input_schema": {"type": "object", "properties": {"pattern": {"type": "string"}}}},
        {"name": "ls", "input_schema": {"type": "object", "properties": {}}},
    ]


def test_rich_context_validates_against_the_sdk_types(rich_context, sdk):
    """Messages, system blocks, tools and the whole request conform to the anthropic SDK's request types."""
    payload = to_anthropic(rich_context)

    assert sdk.anthropic_errors(payload) == []
    assert check_anthropic_pairing(payload) == []
    assert check_anthropic_structure(payload) == []


def test_history_starting_with_assistant_gets_a_user_placeholder(neutral, sdk):
    """A window that starts on an assistant message is preceded by the documented user placeholder."""
    ctx = neutral.context([neutral.message("assistant", "I was saying."), neutral.message("user", "go on")])
    payload = to_anthropic(ctx)

    assert payload["messages"][0] == {
        "role": "user",
        "content": [{"type": "text", "text": LEADING_USER_PLACEHOLDER}],
    }
    assert [m["role"] for m in payload["messages"]] == ["user", "assistant", "user"]
    assert check_anthropic_structure(payload) == []
    assert sdk.anthropic_errors(payload) == []


def test_no_messages_gives_the_placeholder_alone(neutral, sdk):
    """A context without messages still sends one user message (the API needs at least one)."""
    payload = to_anthropic(neutral.context([]))

    assert payload["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": LEADING_USER_PLACEHOLDER, "cache_control": EPHEMERAL}],
        }
    ]
    assert check_anthropic_structure(payload) == []
    assert sdk.anthropic_errors(payload) == []


def test_blank_texts_are_never_emitted(neutral, sdk):
    """Empty and whitespace-only texts are dropped; a message left empty disappears and neighbours merge."""
    ctx = neutral.context(
        [
            neutral.message("user", "task"),
            neutral.message("assistant", "first"),
            neutral.message("user", " \n"),
            neutral.message("assistant", ""),
            neutral.message("assistant", "second"),
        ],
        system="  ",
    )
    payload = to_anthropic(ctx)

    assert "system" not in payload
    assert payload["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "task"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "first"},
                {"type": "text", "text": "second", "cache_control": EPHEMERAL},
            ],
        },
    ]
    assert check_anthropic_structure(payload) == []
    assert sdk.anthropic_errors(payload) == []


def test_a_context_ending_on_a_blank_user_message_still_ends_on_the_user_side(neutral, sdk):
    """A blank last user message was skipped: the request ended on the assistant's answer, a prefill.

    The model would have continued that answer (and with extended thinking on, the API refuses a last
    assistant message that does not begin with thinking); the OpenAI wire sends the user's text as given.
    """
    ctx = neutral.context(
        [
            neutral.message("user", "task"),
            neutral.message("assistant", "Hello! How can I help?"),
            neutral.message("user", "  \n"),
        ]
    )
    payload = to_anthropic(ctx)

    assert [m["role"] for m in payload["messages"]] == ["user", "assistant", "user"]
    assert payload["messages"][-1]["content"][0]["text"] == LEADING_USER_PLACEHOLDER
    assert check_anthropic_structure(payload) == []
    assert sdk.anthropic_errors(payload) == []


def test_blank_results_omit_content_unless_they_are_errors(neutral, sdk):
    """A blank result has no content; a blank error result says so (the API needs content with is_error)."""
    ctx = neutral.context(
        [
            neutral.message("user", "go"),
            *_call_result(neutral, "c1", ""),
            *_call_result(neutral, "c2", " ", is_error=True),
        ]
    )
    payload = to_anthropic(ctx)

    assert payload["messages"][2]["content"] == [{"type": "tool_result", "tool_use_id": "c1"}]
    assert payload["messages"][4]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "c2",
            "content": EMPTY_ERROR_RESULT,
            "is_error": True,
            "cache_control": EPHEMERAL,
        }
    ]
    assert check_anthropic_structure(payload) == []
    assert sdk.anthropic_errors(payload) == []


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"path": "a.py", "n": [1, 2]}', {"path": "a.py", "n": [1, 2]}),
        ("{}", {}),
        ("", {}),
        ("  ", {}),
        ("not json {", {RAW_ARGUMENTS_KEY: "not json {"}),
        ("[1, 2]", {RAW_ARGUMENTS_KEY: "[1, 2]"}),
        ('"a string"', {RAW_ARGUMENTS_KEY: '"a string"'}),
        ("3", {RAW_ARGUMENTS_KEY: "3"}),
        ("null", {RAW_ARGUMENTS_KEY: "null"}),
        ('{"a": NaN}', {RAW_ARGUMENTS_KEY: '{"a": NaN}'}),
    ],
)
def test_tool_input_is_always_a_json_object(arguments, expected):
    """Object arguments are parsed; blank ones are {}; anything else is wrapped verbatim under one key."""
    assert tool_input(arguments) == expected


def test_ids_the_api_rejects_are_rewritten_on_both_sides(neutral, sdk):
    """An id such as ``Bash:12`` becomes a deterministic ``[A-Za-z0-9_-]+`` id on the call and its result."""
    ctx = neutral.context([neutral.message("user", "go"), *_call_result(neutral, "Bash:12")])
    payload = to_anthropic(ctx)
    sent = payload["messages"][1]["content"][0]["id"]

    assert sent == anthropic_call_id("Bash:12") != "Bash:12"
    assert sent.startswith("Bash_12_")
    assert anthropic_call_id("Bash_12") == "Bash_12"
    assert anthropic_call_id("Bash;12") != sent
    assert payload["messages"][2]["content"][0]["tool_use_id"] == sent
    assert check_anthropic_pairing(payload) == []
    assert sdk.anthropic_errors(payload) == []


def _tool_use_ids(payload):
    """Every tool_use id of a payload, in order."""
    return [b["id"] for m in payload["messages"] for b in m["content"] if b.get("type") == "tool_use"]


def _tool_result_ids(payload):
    """Every tool_use_id answered by a tool_result block of a payload, in order."""
    return [
        b["tool_use_id"] for m in payload["messages"] for b in m["content"] if b.get("type") == "tool_result"
    ]


def test_a_call_id_reused_after_its_result_gets_a_unique_tool_use_id(neutral, sdk):
    """gpt-4o's reused id: the first call keeps it, later ones get _2, _3; results follow; ids map back."""
    ctx = neutral.context(
        [
            neutral.message("user", "go"),
            *_call_result(neutral, "call_x"),
            *_call_result(neutral, "call_x"),
            *_call_result(neutral, "call_x"),
        ]
    )
    payload = to_anthropic(ctx)
    ids = anthropic_call_ids(ctx)

    assert _tool_use_ids(payload) == ["call_x", "call_x_2", "call_x_3"]
    assert _tool_result_ids(payload) == ["call_x", "call_x_2", "call_x_3"]
    assert [ids.stored_id(i) for i in _tool_use_ids(payload)] == ["call_x"] * 3
    assert check_anthropic_pairing(payload) == []
    assert check_anthropic_structure(payload) == []
    assert sdk.anthropic_errors(payload) == []
    assert to_anthropic(ctx) == payload  # deterministic


def test_a_suffixed_id_never_takes_an_id_another_call_keeps(neutral):
    """A reused ``c`` skips ``c_2`` when a distinct call is named ``c_2``; rewritten ids are suffixed too."""
    ctx = neutral.context(
        [
            neutral.message("user", "go"),
            *_call_result(neutral, "c"),
            *_call_result(neutral, "c"),
            *_call_result(neutral, "c_2"),
            *_call_result(neutral, "Bash:1"),
            *_call_result(neutral, "Bash:1"),
        ]
    )
    payload = to_anthropic(ctx)
    ids = anthropic_call_ids(ctx)
    rewritten = anthropic_call_id("Bash:1")

    assert _tool_use_ids(payload) == ["c", "c_3", "c_2", rewritten, f"{rewritten}_2"]
    assert _tool_result_ids(payload) == _tool_use_ids(payload)
    assert ids.stored == {"c": "c", "c_3": "c", "c_2": "c_2", rewritten: "Bash:1", f"{rewritten}_2": "Bash:1"}
    assert check_anthropic_pairing(payload) == []


def test_a_suffixed_id_stays_within_the_length_limit(neutral):
    """A reused id of the maximum length is cut before its suffix, so it stays valid."""
    long_id = "x" * ANTHROPIC_MAX_CALL_ID
    ctx = neutral.context(
        [neutral.message("user", "go"), *_call_result(neutral, long_id), *_call_result(neutral, long_id)]
    )
    sent = _tool_use_ids(to_anthropic(ctx))

    assert sent == [long_id, "x" * (ANTHROPIC_MAX_CALL_ID - 2) + "_2"]
    assert all(len(i) <= ANTHROPIC_MAX_CALL_ID for i in sent)


def test_a_pending_placeholder_answers_the_latest_call_of_its_id(neutral):
    """A placeholder result after the reissued call answers that call's unique id, not the first one."""
    ctx = neutral.context(
        [
            neutral.message("user", "go"),
            *_call_result(neutral, "call_x"),
            neutral.message("assistant", tool_calls=(neutral.call(id="call_x", name="ls", arguments="{}"),)),
            neutral.message("tool", "[no result recorded yet]", tool_call_id="call_x", kind="stub"),
        ]
    )
    payload = to_anthropic(ctx)

    assert _tool_result_ids(payload) == ["call_x", "call_x_2"]
    assert check_anthropic_pairing(payload) == []


def test_stable_prefix_zero_puts_the_breakpoint_on_the_system(neutral):
    """With no stable prefix, the breakpoints are the system block and the final block."""
    ctx = neutral.context([neutral.message("user", "a"), neutral.message("assistant", "b")])
    payload = to_anthropic(ctx)

    assert _breakpoints(payload) == [payload["system"][0], payload["messages"][-1]["content"][-1]]


def test_without_system_the_head_breakpoint_is_the_last_tool(neutral):
    """With no system prompt, the last tool definition carries the head breakpoint."""
    ctx = neutral.context([neutral.message("user", "a")], system="")
    payload = to_anthropic(ctx)

    assert "system" not in payload
    assert payload["tools"][-1]["cache_control"] == EPHEMERAL
    assert len(_breakpoints(payload)) == 2


def test_without_system_or_tools_only_prefix_and_final_are_marked(neutral):
    """With neither system nor tools there is no head breakpoint."""
    ctx = neutral.context(
        [
            neutral.message("user", "task"),
            neutral.message("user", "summary", kind="summary"),
            neutral.message("user", "q"),
        ],
        system="",
        tools=(),
        stable_prefix=2,
    )
    payload = to_anthropic(ctx)

    assert [b["text"] for b in _breakpoints(payload)] == ["summary", "q"]


def test_blank_end_of_stable_prefix_marks_the_last_block_before_it(neutral):
    """When the stable prefix ends on a message with no block, the breakpoint moves to the block before it."""
    ctx = neutral.context(
        [
            neutral.message("user", "task"),
            neutral.message("user", " ", kind="summary"),
            neutral.message("assistant", "ok"),
        ],
        stable_prefix=2,
    )
    payload = to_anthropic(ctx)

    assert [b["text"] for b in _breakpoints(payload)] == ["You are a careful coding agent.", "task", "ok"]


def test_prefix_and_final_on_the_same_block_is_one_breakpoint(neutral):
    """When the whole history is the stable prefix, its last block carries a single breakpoint."""
    ctx = neutral.context([neutral.message("user", "summary", kind="summary")], stable_prefix=1)
    payload = to_anthropic(ctx)

    assert len(_breakpoints(payload)) == 2
    assert payload["messages"][0]["content"][0]["cache_control"] == EPHEMERAL


def test_breakpoints_stay_put_while_history_grows(rich_context, neutral):
    """Appending messages moves only the rolling breakpoint; the stable prefix's bytes do not change."""
    longer = neutral.context(
        [*rich_context.messages, neutral.message("assistant", "Done.")],
        stable_prefix=rich_context.stable_prefix,
        tools=rich_context.tools,
    )
    before = json.dumps(to_anthropic(rich_context)["messages"][0])
    after = json.dumps(to_anthropic(longer)["messages"][0])

    assert before == after


def test_payload_shares_nothing_mutable_with_the_context(rich_context):
    """Mutating a payload leaves the context (and the next payload) unchanged."""
    first = to_anthropic(rich_context)
    before = copy.deepcopy(first)
    first["tools"][1]["input_schema"]["properties"]["pattern"]["type"] = "integer"
    first["messages"][1]["content"][1]["input"]["path"] = "b.py"

    assert to_anthropic(rich_context) == before


@pytest.mark.parametrize(
    ("break_it", "tp"),
    [
        (lambda p: p["messages"][1]["content"][1].update(input="a.py"), MessageParam),
        (lambda p: p["messages"][2]["content"][0].pop("tool_use_id"), MessageParam),
        (lambda p: p["messages"][2]["content"][1].update(is_error="yes"), MessageParam),
        (lambda p: p["messages"][0]["content"][1].update(cache_control={"type": "persistent"}), MessageParam),
        (lambda p: p["messages"][0]["content"][0].update(bogus=1), MessageParam),
        (lambda p: p["messages"][0].update(role="human"), MessageParam),
        (lambda p: p["system"][0].update(type="txt"), TextBlockParam),
        (lambda p: p["tools"][0].pop("input_schema"), ToolParam),
    ],
)
def test_a_malformed_payload_fails_the_sdk_check(rich_context, sdk, break_it, tp):
    """The SDK check is strict enough to catch a wrong type, a missing key, a wrong literal, an extra key."""
    payload = to_anthropic(rich_context)
    break_it(payload)
    element = {
        MessageParam: payload["messages"],
        TextBlockParam: payload["system"],
        ToolParam: payload["tools"],
    }[tp]

    assert sdk.anthropic_errors(payload) != []
    assert any(sdk.errors(item, tp) for item in element)
