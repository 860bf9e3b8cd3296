"""Errors stay in the tree at the boundary: nesting depth, idempotency keys, ill-typed message fields."""

from __future__ import annotations

import json

import contextledger
import pydantic
import pytest
from contextledger.application.kernel.messages import (
    AssistantMessage,
    ToolCallIn,
    ToolResult,
    ToolSchemaIn,
    UserMessage,
    check_idempotency_key,
)
from contextledger.domain.limits import MAX_DEPTH, MAX_IDEMPOTENCY_KEY_CHARS, json_text_too_deep, too_deep
from hypothesis import given, settings
from hypothesis import strategies as st


def nested(depth: int) -> dict[str, object]:
    """An object ``depth`` levels deep: ``{"a": {"a": ... {}}}`` (built without recursion)."""
    value: dict[str, object] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def nested_text(depth: int) -> str:
    """JSON text of an object ``depth`` levels deep whose innermost level is an array."""
    return '{"a":' * (depth - 1) + "[]" + "}" * (depth - 1)


@pytest.fixture
def session(any_url):
    """A ledger on each backend with one started session."""
    with contextledger.open_ledger(any_url) as ledger:
        yield ledger, ledger.start_session(system_prompt="limits")


def test_depth_helpers_agree_with_their_definition():
    """A flat object is depth 1; ``MAX_DEPTH`` passes, one more level does not; text and objects agree."""
    assert not too_deep({}, 1)
    assert too_deep({"a": {}}, 1)
    assert not too_deep(nested(MAX_DEPTH))
    assert too_deep(nested(MAX_DEPTH + 1))
    assert not json_text_too_deep(json.dumps(nested(MAX_DEPTH)))
    assert json_text_too_deep(json.dumps(nested(MAX_DEPTH + 1)))
    assert json_text_too_deep(nested_text(MAX_DEPTH + 1))
    assert not json_text_too_deep(nested_text(MAX_DEPTH))


def test_depth_helpers_never_recurse():
    """100,000 levels, and a value that contains itself, are answered without a RecursionError."""
    deep = nested(100_000)
    assert too_deep(deep)
    assert json_text_too_deep("[" * 100_000 + "]" * 100_000)
    looped: dict[str, object] = {}
    looped["self"] = looped
    assert too_deep(looped)


def test_json_text_depth_counts_only_brackets_a_decoder_follows():
    """Brackets in strings (escaped quotes too), after the value, or in non-JSON text do not count."""
    assert not json_text_too_deep(json.dumps({"code": "[" * 500 + '\\"[[' * 100}), 3)
    assert json_text_too_deep(json.dumps({"s": '\\"]]', "x": [[[1]]]}), 3)
    assert not json_text_too_deep("{} " + "[" * 500, 3)
    assert not json_text_too_deep("see " + "[" * 500, 3)
    assert not json_text_too_deep('{"a": "never closed ' + "[" * 500, 3)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='ab"\\[]{}', max_size=6),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3)
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(value=json_values, limit=st.integers(min_value=1, max_value=8))
def test_json_text_depth_matches_the_depth_of_the_decoded_value(value, limit):
    """For any JSON value, the text scan and the object walk give the same answer."""
    if not isinstance(value, dict | list):
        value = [value]
    assert json_text_too_deep(json.dumps(value), limit) == too_deep(value, limit)


def test_dict_arguments_nested_past_the_limit_are_refused(session):
    """Dict arguments ~1,000 deep raised RecursionError; now any depth past MAX_DEPTH is a typed error."""
    ledger, sid = session
    for depth in (MAX_DEPTH + 1, 1_000, 5_000):
        call = {"id": f"c{depth}", "name": "t", "arguments": nested(depth)}
        with pytest.raises(contextledger.InvalidMessageError, match=f"more than {MAX_DEPTH} levels"):
            ledger.add_assistant_message(sid, None, tool_calls=[call])
        with pytest.raises(contextledger.InvalidMessageError, match="arguments"):
            ledger.append(sid, {"role": "assistant", "tool_calls": [call]})
    assert ledger.version(sid) == 1
    ledger.add_assistant_message(
        sid, None, tool_calls=[{"id": "ok", "name": "t", "arguments": nested(MAX_DEPTH)}]
    )
    assert ledger.version(sid) == 2


def test_json_text_arguments_nested_past_the_limit_are_refused_before_storing(session):
    """Deep JSON-text arguments were stored and then crashed ``to_anthropic``; now refused at append."""
    ledger, sid = session
    for depth in (MAX_DEPTH + 1, 1_000, 20_000):
        call = {"id": "c", "name": "t", "arguments": nested_text(depth)}
        with pytest.raises(contextledger.InvalidMessageError, match="arguments JSON"):
            ledger.add_assistant_message(sid, None, tool_calls=[call])
    assert ledger.version(sid) == 1
    ledger.add_assistant_message(
        sid, None, tool_calls=[{"id": "c", "name": "t", "arguments": nested_text(MAX_DEPTH)}]
    )
    ledger.add_tool_result(sid, "c", "done")
    context = contextledger.Renderer(ledger).render(sid)
    (tool_use,) = [
        b
        for m in contextledger.to_anthropic(context)["messages"]
        for b in m["content"]
        if b["type"] == "tool_use"
    ]
    assert not too_deep(tool_use["input"], MAX_DEPTH)
    assert too_deep(tool_use["input"], MAX_DEPTH - 1)
    assert contextledger.to_openai(context)


@pytest.mark.parametrize("role", ["user", "assistant", "tool"])
def test_meta_nested_past_the_limit_is_refused(session, role):
    """``meta`` ~1,000 deep raised RecursionError in the store's encoder; now a typed error, none written."""
    ledger, sid = session
    ledger.add_assistant_message(sid, None, tool_calls=[{"id": "c", "name": "t"}])
    message = {
        "user": {"content": "u"},
        "assistant": {"content": "a"},
        "tool": {"call_id": "c", "content": "r"},
    }
    for depth in (MAX_DEPTH + 1, 1_000, 50_000):
        with pytest.raises(contextledger.InvalidMessageError, match="meta nests"):
            ledger.append(sid, {"role": role, **message[role], "meta": nested(depth)})
    assert ledger.version(sid) == 2
    ledger.append(sid, {"role": role, **message[role], "meta": nested(MAX_DEPTH)})
    assert ledger.events(sid)[-1].event.meta == nested(MAX_DEPTH)


def test_tool_parameters_nested_past_the_limit_are_refused(any_url):
    """A tool schema's parameters follow the same limit."""
    with contextledger.open_ledger(any_url) as ledger:
        with pytest.raises(contextledger.InvalidMessageError, match="parameters nests"):
            ledger.start_session(tools=[{"name": "t", "parameters": nested(1_000)}])
        assert ledger.sessions() == []


def test_session_metadata_too_deep_to_store_is_refused(any_url):
    """Session metadata deeper than MAX_DEPTH is refused where it enters, on every backend."""
    with contextledger.open_ledger(any_url) as ledger:
        for depth in (1_000, 100_000):
            with pytest.raises(contextledger.InvalidMessageError, match="nests deeper than"):
                ledger.start_session(metadata=nested(depth))
        assert ledger.sessions() == []
        sid = ledger.start_session(metadata=nested(MAX_DEPTH))
        assert ledger.events(sid)[0].event.metadata == nested(MAX_DEPTH)


BAD_CALLS = [
    ("add_user_message", (None,), {}),
    ("add_user_message", ([{"type": "text", "text": "hi"}],), {}),
    ("add_user_message", (42,), {}),
    ("add_assistant_message", (5,), {}),
    ("add_assistant_message", (None,), {"reasoning": ["r"]}),
    ("add_assistant_message", (None,), {"tool_calls": [{"id": 1, "name": "t"}]}),
    ("add_assistant_message", (None,), {"tool_calls": [{"id": "c", "name": "t", "arguments": [1]}]}),
    ("add_tool_result", (None, "x"), {}),
    ("add_tool_result", ("c", None), {}),
    ("add_tool_result", ("c", [{"type": "text", "text": "x"}]), {}),
    ("add_tool_result", ("c", "x"), {"is_error": "yes"}),
]


@pytest.mark.parametrize(("method", "args", "kwargs"), BAD_CALLS)
def test_ill_typed_fields_raise_invalid_message_error_not_pydantic(ledger, method, args, kwargs):
    """``add_user_message(s, None)`` raised a raw ``pydantic_core.ValidationError``; now the package's own."""
    sid = ledger.start_session()
    ledger.add_assistant_message(sid, None, tool_calls=[{"id": "c", "name": "t"}])
    with pytest.raises(contextledger.InvalidMessageError) as raised:
        getattr(ledger, method)(sid, *args, **kwargs)
    assert not isinstance(raised.value, pydantic.ValidationError)
    assert raised.value.__cause__ is None
    assert ledger.version(sid) == 2


def test_every_boundary_model_raises_the_packages_error_when_built_directly():
    """Each model names the bad field in an ``InvalidMessageError``."""
    cases = [
        (UserMessage, {"content": None}, "invalid user message: content: must be text"),
        (AssistantMessage, {"content": 1}, "invalid assistant message: content"),
        (ToolResult, {"call_id": "", "content": "x"}, "invalid tool message: call_id"),
        (ToolCallIn, {"id": "c", "name": "t", "arguments": nested(100)}, "invalid tool call: arguments"),
        (ToolSchemaIn, {"name": 3}, "invalid tool schema: name"),
        (UserMessage, {"content": "x", "extra": 1}, "invalid user message: extra"),
    ]
    for model, fields, message in cases:
        with pytest.raises(contextledger.InvalidMessageError, match=message):
            model(**fields)
    assert UserMessage(content="fine").content == "fine"


@pytest.mark.parametrize(
    "key",
    ["a\ud800b", "\udfff", "", "k" * (MAX_IDEMPOTENCY_KEY_CHARS + 1), "nul\x00key", 7, b"bytes"],
    ids=["lone-surrogate", "low-surrogate", "empty", "too-long", "nul", "int", "bytes"],
)
def test_unusable_idempotency_keys_are_invalid(key):
    """A key must be non-empty UTF-8 text of bounded length without NUL."""
    with pytest.raises(contextledger.InvalidMessageError, match="idempotency key"):
        check_idempotency_key(key)


def test_usable_idempotency_keys_pass_unchanged():
    """Ordinary keys, including non-ASCII ones and one at the length limit, pass as given."""
    for key in (None, "retry-1", "ключ-🙂", "k" * MAX_IDEMPOTENCY_KEY_CHARS):
        assert check_idempotency_key(key) == key


@pytest.mark.parametrize(
    "url",
    [
        "memory://",
        "sqlite",
    ],
)
def test_a_lone_surrogate_in_an_idempotency_key_is_a_typed_error_on_every_backend(url, tmp_path):
    """A lone surrogate raised UnicodeEncodeError on SQLite; it must be InvalidMessageError everywhere."""
    target = url if url != "sqlite" else f"sqlite:///{tmp_path / 'k.db'}"
    with contextledger.open_ledger(target) as ledger:
        sid = ledger.start_session()
        with pytest.raises(contextledger.InvalidMessageError):
            ledger.add_user_message(sid, "hi", idempotency_key="a\ud800b")
        assert ledger.version(sid) == 1


@pytest.mark.parametrize("session_id", ["team::alice", "a::summaries", "x\x00y", "::"])
def test_a_session_id_that_would_name_a_side_stream_is_refused_and_nothing_is_written(session_id):
    """``::`` separates a session from its side streams (``::summaries``, ``::calls``): no id holds it."""
    with contextledger.open_ledger("memory://") as ledger:
        ledger.start_session(session_id="parent")
        ledger.add_user_message("parent", "hi")
        for start in (
            lambda: ledger.start_session(session_id=session_id),
            lambda: ledger.start_sessions([{"session_id": "fine"}, {"session_id": session_id}]),
            lambda: ledger.fork("parent", 2, new_session_id=session_id),
        ):
            with pytest.raises(contextledger.InvalidMessageError):
                start()
        assert [s.session_id for s in ledger.sessions()] == ["parent"]


@pytest.mark.parametrize("url", ["memory://", "sqlite"])
def test_a_lone_surrogate_in_any_text_is_a_typed_error_and_writes_nothing(url, tmp_path):
    """A text that is not valid UTF-8 is refused alike, large or short, retried under a used key or not.

    A large one (a blob) was taken on memory://, and every later request failed to encode; a retry under a
    used key raised a raw UnicodeEncodeError.
    """
    target = url if url != "sqlite" else f"sqlite:///{tmp_path / 't.db'}"
    with contextledger.open_ledger(target) as ledger:
        sid = ledger.start_session()
        ledger.add_user_message(sid, "go", idempotency_key="k1")
        head = ledger.version(sid)
        for text, key in (("x" * 9_000 + " bad \ud800", None), ("bad \ud800", "k1"), ("bad \ud800", None)):
            with pytest.raises(contextledger.InvalidMessageError, match=r"UTF-8|utf-8|Unicode"):
                ledger.add_user_message(sid, text, idempotency_key=key)
        assert ledger.version(sid) == head
