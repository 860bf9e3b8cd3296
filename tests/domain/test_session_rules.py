"""The append rules of a session, checked without any store."""

from __future__ import annotations

import contextledger
import pytest
from contextledger.domain.content import InlineText
from contextledger.domain.events import (
    AssistantMessageAdded,
    ItemPinned,
    SessionStarted,
    ToolCall,
    ToolResultRecorded,
    UserMessageAdded,
)
from contextledger.domain.session import SessionState


def _started() -> SessionState:
    state = SessionState("s")
    for event in (
        SessionStarted(session_id="s"),
        AssistantMessageAdded(tool_calls=(ToolCall(id="a", name="ls"), ToolCall(id="b", name="cat"))),
    ):
        state.check([event])
        state.apply(event)
    return state


def _result(call_id: str) -> ToolResultRecorded:
    return ToolResultRecorded(call_id=call_id, tool_name="ls", content=InlineText("x"))


def test_pending_calls_are_those_without_results():
    """Issued calls stay pending until their result is applied."""
    state = _started()
    state.apply(_result("a"))
    assert state.pending_calls == ["b"]


def test_check_never_changes_the_state():
    """A successful check leaves version and call sets as they were."""
    state = _started()
    state.check([_result("a"), _result("b")])
    assert (state.version, state.pending_calls) == (2, ["a", "b"])


@pytest.mark.parametrize(
    ("events", "error"),
    [
        ([_result("zz")], contextledger.UnknownToolCallError),
        ([_result("a"), _result("a")], contextledger.DuplicateToolResultError),
        (
            [AssistantMessageAdded(tool_calls=(ToolCall(id="a", name="x"),))],
            contextledger.DuplicateToolCallError,
        ),
        (
            [AssistantMessageAdded(tool_calls=(ToolCall(id="n", name="x"), ToolCall(id="n", name="y")))],
            contextledger.DuplicateToolCallError,
        ),
        ([SessionStarted(session_id="s")], contextledger.SessionExistsError),
        ([ItemPinned(position=99)], contextledger.InvalidMessageError),
    ],
    ids=[
        "unknown-call",
        "second-result",
        "reused-id",
        "repeated-id-in-one-message",
        "restart",
        "pin-outside",
    ],
)
def test_rule_violations_raise_typed_errors(events, error):
    """Each broken rule raises its own error from the package tree."""
    with pytest.raises(error):
        _started().check(events)


def test_a_result_may_follow_its_call_in_the_same_batch():
    """Calls issued earlier in a batch can be answered later in the same batch."""
    state = _started()
    state.check([AssistantMessageAdded(tool_calls=(ToolCall(id="c", name="ls"),)), _result("c")])


def test_messages_before_the_session_starts_are_refused():
    """Nothing may be appended to a session that was never started."""
    with pytest.raises(contextledger.SessionNotFoundError):
        SessionState("s").check([UserMessageAdded(content=InlineText("hi"))])
