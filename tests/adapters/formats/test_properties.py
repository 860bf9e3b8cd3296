"""Properties over random well-paired neutral contexts: paired, SDK-valid, lossless, deterministic."""

from __future__ import annotations

import json

import msgspec
from contextledger.adapters.formats.anthropic import to_anthropic
from contextledger.adapters.formats.openai import to_openai
from contextledger.adapters.formats.pairing import (
    check_anthropic_pairing,
    check_anthropic_structure,
    check_openai_pairing,
    check_openai_structure,
)
from contextledger.domain.events import ToolSchema
from contextledger.projections.context import RenderedContext, RenderedMessage, RenderedToolCall
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

TEXTS = st.one_of(
    st.sampled_from(
        ["", " ", "\n\t", "ok", "Done.", "[result expired: ls call_1, 9 tokens; restore: seq 3]"]
    ),
    st.text(st.characters(codec="utf-8"), max_size=24),
)
ARGUMENTS = st.one_of(
    st.dictionaries(st.text(max_size=4), st.integers() | st.text(max_size=4), max_size=3).map(json.dumps),
    st.sampled_from(["", "{}", "not json {", "[1, 2]", '"s"', "3", "null", '{"a": NaN}']),
)
ID_PREFIXES = st.sampled_from(["call_", "toolu_", "Bash:", "functions.read:", "c" * 45])
TOOL_NAMES = st.sampled_from(["read_file", "grep", "ls", "bash"])


def _message(draw, role, kind="message", **fields):
    """A neutral message with a drawn text and token count."""
    text = draw(TEXTS)
    return RenderedMessage(role=role, text=text, tokens=draw(st.integers(0, 50)), kind=kind, **fields)


@st.composite
def steps(draw, next_id):
    """An assistant message (text, 0-3 parallel calls) followed by its results in a drawn order."""
    calls = tuple(
        RenderedToolCall(
            id=f"{draw(ID_PREFIXES)}{next_id()}", name=draw(TOOL_NAMES), arguments=draw(ARGUMENTS)
        )
        for _ in range(draw(st.integers(0, 3)))
    )
    out = [_message(draw, "assistant", tool_calls=calls)]
    for call in draw(st.permutations(calls)):
        kind = draw(st.sampled_from(["message", "stub", "truncated"]))
        error = draw(st.booleans())
        out.append(_message(draw, "tool", kind, tool_call_id=call.id, tool_name=call.name, is_error=error))
    return out


@st.composite
def contexts(draw):
    """A well-paired neutral context: optional pinned head and summary, turns, an injection, tools."""
    counter = iter(range(1, 10_000))

    def next_id():
        return next(counter)

    head = []
    if draw(st.booleans()):
        head.append(_message(draw, "user"))
    if draw(st.booleans()):
        head.append(_message(draw, draw(st.sampled_from(["user", "assistant"])), "summary"))
    history = []
    for turn in range(draw(st.integers(0, 4))):
        if turn > 0 or not draw(st.booleans()):  # a window may start on an assistant message
            history.append(_message(draw, "user", draw(st.sampled_from(["message", "truncated"]))))
        for _ in range(draw(st.integers(0, 3))):
            history.extend(draw(steps(next_id)))
    if draw(st.booleans()):
        slots = [i for i in range(len(history) + 1) if i == len(history) or history[i].role != "tool"]
        role = draw(st.sampled_from(["user", "assistant"]))
        history.insert(draw(st.sampled_from(slots)), _message(draw, role, "injection"))
    tools = tuple(
        ToolSchema(
            name=name, description=draw(TEXTS), parameters=draw(st.sampled_from([{}, {"type": "object"}]))
        )
        for name in draw(st.lists(TOOL_NAMES, unique=True, max_size=3))
    )
    messages = (*head, *history)
    return RenderedContext(
        session_id="s",
        position=len(messages),
        policy="default",
        tokenizer="cl100k_base",
        system=draw(TEXTS),
        system_tokens=7,
        tools=tools,
        tools_tokens=5 * len(tools),
        messages=messages,
        stable_prefix=draw(st.integers(0, len(head))),
        tokens=7 + 5 * len(tools) + sum(m.tokens for m in messages),
        budget=100_000,
    )


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(contexts())
def test_openai_payload_is_paired_and_sdk_valid(sdk, ctx):
    """Any well-paired context gives a Chat Completions payload without pairing, structure, shape problems."""
    payload = to_openai(ctx)

    assert check_openai_pairing(payload) == []
    assert check_openai_structure(payload) == []
    assert sdk.openai_errors(payload) == []


@SETTINGS
@given(contexts())
def test_anthropic_payload_is_paired_valid_and_sdk_valid(sdk, ctx):
    """Any well-paired context gives a Messages payload with no pairing, structure or shape problem."""
    payload = to_anthropic(ctx)

    assert check_anthropic_pairing(payload) == []
    assert check_anthropic_structure(payload) == []
    assert sdk.anthropic_errors(payload) == []
    assert len([b for b in _blocks(payload) if "cache_control" in b]) <= 3


@SETTINGS
@given(contexts())
def test_no_call_result_or_text_is_lost(ctx):
    """Calls and results appear once in each format; all texts in OpenAI, non-blank ones in Anthropic."""
    calls = sum(len(m.tool_calls) for m in ctx.messages)
    results = sum(m.role == "tool" and m.kind not in ("summary", "injection") for m in ctx.messages)
    openai = to_openai(ctx)
    anthropic = to_anthropic(ctx)
    blocks = list(_blocks(anthropic))

    assert sum(len(m.get("tool_calls", ())) for m in openai["messages"]) == calls
    assert sum(m["role"] == "tool" for m in openai["messages"]) == results
    assert sum(b["type"] == "tool_use" for b in blocks) == calls
    assert sum(b["type"] == "tool_result" for b in blocks) == results
    texts = [b["text"] for b in blocks if b["type"] == "text"]
    results_text = [b.get("content") for b in blocks if b["type"] == "tool_result"]
    contents = [m["content"] for m in openai["messages"]]
    for message in ctx.messages:
        assert message.text in contents or (message.text == "" and message.tool_calls)
        if message.text.strip():
            assert message.text in texts or message.text in results_text


@SETTINGS
@given(contexts())
def test_equal_contexts_give_byte_identical_payloads(ctx):
    """A context and its decoded copy give byte-identical JSON in both formats, call after call."""
    twin = msgspec.json.decode(msgspec.json.encode(ctx), type=RenderedContext)

    for to_wire in (to_openai, to_anthropic):
        first = json.dumps(to_wire(ctx), ensure_ascii=False).encode()
        assert json.dumps(to_wire(twin), ensure_ascii=False).encode() == first
        assert json.dumps(to_wire(ctx), ensure_ascii=False).encode() == first


def _blocks(payload):
    """Yield every content block of a Messages payload."""
    for message in payload["messages"]:
        yield from message["content"]


@SETTINGS
@given(contexts())
def test_a_changed_payload_never_reaches_the_next_one(ctx):
    """Wire messages kept per rendered message are copied out: a caller's edits never reach the next payload.

    An agent loop re-sends most of its window, so the wire form of each rendered message is kept
    and copied (ADR 0046); the copy shares no dict or list with what is kept.
    """
    first = json.dumps(to_openai(ctx), ensure_ascii=False)
    payload = to_openai(ctx)
    for message in payload["messages"]:
        message["content"] = "edited"
        for call in message.get("tool_calls", ()):
            call["id"] = "edited"
            call["function"]["arguments"] = "edited"
        message.setdefault("tool_calls", []).append({"id": "added"})

    assert json.dumps(to_openai(ctx), ensure_ascii=False) == first


def test_a_kept_wire_message_goes_with_its_message():
    """The kept wire form of a message is dropped when the message is freed: no text is kept alive."""
    import gc  # noqa: PLC0415

    from contextledger.adapters.formats import openai as wire  # noqa: PLC0415

    message = RenderedMessage(role="user", text="a long text " * 1_000, tokens=3_000)
    ctx = RenderedContext(
        session_id="s", position=1, policy="default", tokenizer="cl100k_base", system="", system_tokens=0,
        tools=(), tools_tokens=0, messages=(message,), stable_prefix=0, tokens=3_000, budget=100_000,
    )  # fmt: skip
    assert to_openai(ctx)["messages"] == [{"role": "user", "content": message.text}]
    key = id(message)
    assert wire._WIRE[key][0]() is message
    del ctx, message
    gc.collect()
    assert key not in wire._WIRE
