"""Pairing and structure checks: each problem a provider rejects is found, valid payloads pass."""

from __future__ import annotations

from contextledger.adapters.formats.anthropic import to_anthropic
from contextledger.adapters.formats.openai import to_openai
from contextledger.adapters.formats.pairing import (
    WireProblem,
    check_anthropic_pairing,
    check_anthropic_structure,
    check_openai_pairing,
    check_openai_structure,
)


def _kinds(problems):
    """Return (kind, message index, detail) triples for compact assertions."""
    return [(p.kind, p.message, p.detail) for p in problems]


def _oa_call(*ids, text=None):
    """An OpenAI assistant message calling ``ids``."""
    calls = [{"id": i, "type": "function", "function": {"name": "ls", "arguments": "{}"}} for i in ids]
    return {"role": "assistant", "content": text, "tool_calls": calls}


def _oa_result(call_id):
    """An OpenAI tool message answering ``call_id``."""
    return {"role": "tool", "tool_call_id": call_id, "content": "ok"}


def _an_call(*ids):
    """An Anthropic assistant message with one tool_use per id."""
    return {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": i, "name": "ls", "input": {}} for i in ids],
    }


def _an_results(*ids, text=None, text_first=False):
    """An Anthropic user message with one tool_result per id, and optional text before or after."""
    blocks = [{"type": "tool_result", "tool_use_id": i, "content": "ok"} for i in ids]
    if text is not None:
        blocks = (
            [{"type": "text", "text": text}, *blocks]
            if text_first
            else [*blocks, {"type": "text", "text": text}]
        )
    return {"role": "user", "content": blocks}


def _user(text="go"):
    """A user message in either format."""
    return {"role": "user", "content": text}


def test_openai_well_paired_payload_has_no_problem():
    """Parallel calls answered in any order right after their message pass."""
    payload = {"messages": [_user(), _oa_call("a", "b"), _oa_result("b"), _oa_result("a"), _user()]}

    assert check_openai_pairing(payload) == []


def test_openai_orphaned_call_and_result():
    """A call never answered and a result for an unknown call are both reported."""
    payload = {
        "messages": [_user(), _oa_call("a"), _user(), _oa_call("b"), _oa_result("b"), _oa_result("zz")]
    }

    assert _kinds(check_openai_pairing(payload)) == [("orphaned_result", 5, "zz"), ("orphaned_call", 1, "a")]


def test_openai_result_before_its_call():
    """A result that comes before the assistant message issuing its call is reported."""
    payload = {"messages": [_user(), _oa_result("a"), _oa_call("a")]}

    assert _kinds(check_openai_pairing(payload)) == [("result_before_call", 1, "a")]


def test_openai_result_not_right_after_its_call():
    """A result separated from its call by another message is reported, even after a later call."""
    payload = {"messages": [_user(), _oa_call("a"), _user("wait"), _oa_result("a")]}
    later = {"messages": [_user(), _oa_call("a"), _oa_call("b"), _oa_result("b"), _oa_result("a")]}

    assert _kinds(check_openai_pairing(payload)) == [("result_not_adjacent", 3, "a")]
    assert _kinds(check_openai_pairing(later)) == [("result_not_adjacent", 4, "a")]


def test_openai_duplicates_and_missing_ids():
    """Second results, tool messages without an id and a reissued call left unanswered are reported."""
    payload = {
        "messages": [
            _user(),
            _oa_call("a"),
            _oa_result("a"),
            _oa_result("a"),
            _oa_call("a"),
            {"role": "tool", "content": "?"},
        ]
    }

    assert _kinds(check_openai_pairing(payload)) == [
        ("duplicate_result", 3, "a"),
        ("orphaned_result", 5, "no tool_call_id"),
        ("orphaned_call", 4, "a"),
    ]


def test_openai_call_id_reused_after_its_result_is_valid():
    """gpt-4o issues an answered id again: each result answers the latest call with its id."""
    payload = {
        "messages": [
            _user(),
            _oa_call("call_x"),
            _oa_result("call_x"),
            _oa_call("call_x", "call_y"),
            _oa_result("call_y"),
            _oa_result("call_x"),
            _user(),
        ]
    }

    assert check_openai_pairing(payload) == []


def test_openai_call_id_reused_while_awaiting_its_result_is_a_duplicate():
    """An id issued again before its result (or twice in one message) is a duplicate call."""
    pending = {"messages": [_user(), _oa_call("a"), _oa_call("a"), _oa_result("a")]}
    twice = {"messages": [_user(), _oa_call("a", "a"), _oa_result("a")]}

    assert _kinds(check_openai_pairing(pending)) == [
        ("duplicate_call", 2, "a"),
        ("result_not_adjacent", 3, "a"),
    ]
    assert _kinds(check_openai_pairing(twice)) == [("duplicate_call", 1, "a")]


def test_anthropic_tool_use_ids_must_be_unique_in_the_request_even_when_answered():
    """The Messages API requires unique tool_use ids in one request, answered or not."""
    payload = {
        "messages": [
            _user(),
            _an_call("toolu_a"),
            _an_results("toolu_a"),
            _an_call("toolu_a"),
            _an_results("toolu_a"),
        ]
    }

    assert ("duplicate_call", 3, "toolu_a") in _kinds(check_anthropic_pairing(payload))


def test_openai_structure_problems_are_found():
    """Null content without calls, non-string user content and over-long ids are reported."""
    payload = {
        "messages": [
            {"role": "user", "content": None},
            {"role": "assistant", "content": None},
            _oa_call("x" * 41),
            _oa_result("x" * 41),
        ]
    }

    assert _kinds(check_openai_structure(payload)) == [
        ("empty_content", 0, "user"),
        ("empty_content", 1, "assistant"),
        ("id_too_long", 2, "x" * 41),
        ("id_too_long", 3, "x" * 41),
    ]
    assert check_openai_structure({"messages": [_user(), _oa_call("a"), _oa_result("a")]}) == []


def test_anthropic_well_paired_payload_has_no_problem():
    """Results first in the next user message, text after them, pass."""
    payload = {"messages": [_user(), _an_call("a", "b"), _an_results("b", "a", text="more"), _an_call("c")]}
    payload["messages"].append(_an_results("c"))

    assert check_anthropic_pairing(payload) == []


def test_anthropic_orphans_and_gaps():
    """Unanswered calls, unknown results and results not in the very next message are reported."""
    payload = {
        "messages": [
            _user(),
            _an_call("a"),
            {"role": "user", "content": [{"type": "text", "text": "hm"}]},
            _an_call("b"),
            _an_results("a", "zz"),
        ]
    }

    assert _kinds(check_anthropic_pairing(payload)) == [
        ("result_not_adjacent", 4, "a"),
        ("orphaned_result", 4, "zz"),
        ("orphaned_call", 3, "b"),
    ]


def test_anthropic_results_must_come_first_and_in_user_messages():
    """Text before a tool_result, a tool_result from the assistant and a tool_use from the user fail."""
    payload = {
        "messages": [
            _user(),
            _an_call("a"),
            _an_results("a", text="first", text_first=True),
            {"role": "assistant", "content": [{"type": "tool_result", "tool_use_id": "a"}]},
            {"role": "user", "content": [{"type": "tool_use", "id": "x", "name": "ls", "input": {}}]},
        ]
    }

    assert _kinds(check_anthropic_pairing(payload)) == [
        ("misplaced_block", 4, "tool_use in user"),
        ("result_not_first", 2, "a"),
        ("misplaced_block", 3, "tool_result in assistant"),
    ]


def test_anthropic_structure_problems_are_found():
    """First message not user, same roles twice, empty content, blank text and too many breakpoints fail."""
    marked = {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}
    payload = {
        "system": [{"type": "text", "text": " "}, dict(marked)],
        "messages": [
            {"role": "assistant", "content": [dict(marked), dict(marked)]},
            {"role": "user", "content": []},
            {"role": "user", "content": [{"type": "text", "text": ""}, dict(marked), dict(marked)]},
            {"role": "assistant", "content": [{"type": "tool_result", "tool_use_id": "a", "is_error": True}]},
        ],
    }

    assert _kinds(check_anthropic_structure(payload)) == [
        ("first_not_user", 0, ""),
        ("empty_content", 1, ""),
        ("roles_not_alternating", 2, ""),
        ("blank_text", 2, ""),
        ("empty_content", 3, "error tool_result"),
        ("blank_text", -1, "system"),
        ("too_many_breakpoints", -1, "5"),
    ]


def test_a_final_assistant_message_may_be_empty():
    """The API allows empty content only on a final assistant message."""
    payload = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": []}]}

    assert check_anthropic_structure(payload) == []


def test_an_ill_paired_context_is_caught_in_both_formats(neutral):
    """A user message between a call and its result is reported in both wire formats."""
    ctx = neutral.context(
        [
            neutral.message("user", "go"),
            neutral.message("assistant", tool_calls=(neutral.call(id="c1", name="ls", arguments="{}"),)),
            neutral.message("user", "memory", kind="injection"),
            neutral.message("tool", "ok", tool_call_id="c1"),
        ]
    )

    assert _kinds(check_openai_pairing(to_openai(ctx))) == [("result_not_adjacent", 4, "c1")]
    assert _kinds(check_anthropic_pairing(to_anthropic(ctx))) == [("result_not_first", 2, "c1")]


def test_problems_read_well():
    """A problem prints its place, kind and detail."""
    assert (
        str(WireProblem(kind="orphaned_call", message=3, detail="call_7"))
        == "messages[3]: orphaned_call call_7"
    )
    assert str(WireProblem(kind="first_not_user", message=0)) == "messages[0]: first_not_user"
