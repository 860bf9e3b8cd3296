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
from hypothesis import given, settings
from hypothesis import strategies as st


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


def _issue(*call_ids: str) -> AssistantMessageAdded:
    return AssistantMessageAdded(tool_calls=tuple(ToolCall(id=c, name="cat") for c in call_ids))


def _applied(state: SessionState, *events: object) -> SessionState:
    for event in events:
        state.check([event])
        state.apply(event)
    return state


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
            [_result("a"), _issue("a"), _issue("a")],
            contextledger.DuplicateToolCallError,
        ),
        ([_result("a"), _issue("a"), _result("a"), _result("a")], contextledger.DuplicateToolResultError),
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
        "id-reused-while-pending",
        "id-reused-again-while-its-reuse-is-pending",
        "second-result-after-reuse",
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


def test_an_answered_call_id_may_be_issued_again():
    """gpt-4o reuses an id once its call is answered: accepted, and pending again until answered."""
    state = _applied(_started(), _result("a"), _issue("a"))
    assert state.pending_calls == ["b", "a"]
    _applied(state, _result("a"))
    assert state.pending_calls == ["b"]


def test_a_result_answers_the_latest_call_of_its_id():
    """The occurrence a result answers is the position of the assistant event that issued it last."""
    state = _applied(_started(), _result("a"), _issue("a"))
    assert state.calls.pending["a"] == 4
    trial = state.calls.trial()
    assert trial.answer("a") == 4
    assert state.calls.pending["a"] == 4  # a trial never changes the state it came from
    assert trial.name_of("a") == "cat"


def test_a_whole_batch_may_reuse_an_id_after_answering_it():
    """Answer, issue again and answer again, all in one batch: checked as one sequence."""
    state = _started()
    state.check([_result("a"), _issue("a"), _result("a"), _issue("a", "c"), _result("c"), _result("a")])
    assert state.pending_calls == ["a", "b"]


def test_rules_snapshot_round_trips_reused_ids():
    """A snapshot keeps the issued names and which occurrence of each id is pending."""
    state = _applied(_started(), _result("a"), _issue("a"))
    again = SessionState.from_snapshot("s", state.to_snapshot())
    assert (again.version, again.pending_calls, again.calls.pending) == (4, ["b", "a"], {"b": 2, "a": 4})
    with pytest.raises(contextledger.DuplicateToolCallError):
        again.check([_issue("a")])
    with pytest.raises(contextledger.DuplicateToolResultError):
        _applied(again, _result("b")).check([_result("b")])


def test_a_snapshot_of_the_earlier_form_is_refused_so_the_log_is_replayed():
    """Issued/answered snapshots (no call positions) raise KeyError: the cache ignores them and refolds."""
    with pytest.raises(KeyError):
        SessionState.from_snapshot("s", {"version": 2, "issued": {"a": "ls"}, "answered": []})


def test_a_trial_layers_its_changes_over_the_state():
    """A trial answers and reissues ids on top of the state's calls; the state itself never moves."""
    state = _started()
    trial = state.calls.trial()
    assert trial.answer("a") == 2
    trial.issue([("a", "cat"), ("c", "cat")], 5)
    assert (trial.pending_calls, trial.pending["a"], len(trial.pending)) == (["b", "a", "c"], 5, 3)
    assert trial.answer("a") == 5
    with pytest.raises(contextledger.DuplicateToolResultError):
        trial.answer("a")
    assert (state.pending_calls, state.calls.pending["a"], state.calls.name_of("c")) == (["a", "b"], 2, None)


_events = st.lists(
    st.one_of(
        st.lists(st.sampled_from("abc"), min_size=1, max_size=2).map(lambda ids: _issue(*ids)),
        st.sampled_from("abcz").map(_result),
    ),
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(events=_events, cut=st.integers(0, 12))
def test_a_batch_is_accepted_exactly_when_its_events_are_one_by_one(events, cut):
    """Checking events as one batch gives the same verdict as checking and applying them one at a time."""
    one_by_one = _started()
    verdict: type[Exception] | None = None
    for event in events:
        try:
            one_by_one.check([event])
        except contextledger.ValidationError as error:
            verdict = type(error)
            break
        one_by_one.apply(event)
    state = _applied(_started(), *events[:cut]) if verdict is None else _started()
    batch = events[cut:] if verdict is None else events
    if verdict is None:
        state.check(batch)
        for event in batch:
            state.apply(event)
        assert (state.version, state.pending_calls) == (one_by_one.version, one_by_one.pending_calls)
        assert state.to_snapshot() == one_by_one.to_snapshot()
    else:
        before = state.to_snapshot()
        with pytest.raises(verdict):
            state.check(batch)
        assert state.to_snapshot() == before
