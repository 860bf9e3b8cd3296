"""A batch's session rules (ADR 0048): ``check`` and ``apply_all`` give the answers of one by one."""

from __future__ import annotations

from contextledger.domain.content import InlineText
from contextledger.domain.errors import ContextLedgerError
from contextledger.domain.events import (
    AnyEvent,
    AssistantMessageAdded,
    ItemPinned,
    ItemUnpinned,
    PolicyRegistered,
    SessionStarted,
    SummaryRecorded,
    ToolCall,
    ToolResultRecorded,
    UserMessageAdded,
)
from contextledger.domain.session import SessionState
from hypothesis import given, settings
from hypothesis import strategies as st

_IDS = st.sampled_from(["a", "b", "c"])

_EVENTS = st.one_of(
    st.builds(lambda: UserMessageAdded(content=InlineText("hi"))),
    st.builds(lambda: PolicyRegistered(policy_hash="h", name="p", policy_json="{}")),
    st.builds(
        lambda ids: AssistantMessageAdded(tool_calls=tuple(ToolCall(id=i, name="ls") for i in ids)),
        st.lists(_IDS, max_size=2),
    ),
    st.builds(lambda i: ToolResultRecorded(call_id=i, tool_name="ls", content=InlineText("x")), _IDS),
    st.builds(lambda p: ItemPinned(position=p), st.integers(-1, 8)),
    st.builds(lambda p: ItemUnpinned(position=p), st.integers(-1, 8)),
    st.builds(lambda s: SessionStarted(session_id=s), st.sampled_from(["s", "t"])),
    st.builds(
        lambda: SummaryRecorded(
            summary_id="x",
            session_id="s",
            covers_from=1,
            covers_through=1,
            content=InlineText("s"),
            produced_at=1,
        )
    ),
)


@st.composite
def _states(draw: st.DrawFn) -> SessionState:
    """A session at version 0-4, maybe with calls issued (pending or answered)."""
    state = SessionState("s")
    state.version = draw(st.integers(0, 4))
    for call_id in draw(st.lists(_IDS, max_size=3, unique=True)):
        state.calls.issue([(call_id, "ls")], 1)
        if draw(st.booleans()):
            state.calls.answer(call_id)
    return state


def _outcome(check: object) -> object:
    """None when ``check()`` passes, else the type and text of the error it raised."""
    try:
        check()  # type: ignore[operator]
    except ContextLedgerError as error:
        return (type(error), str(error))
    return None


def _copy(state: SessionState) -> SessionState:
    return SessionState.from_snapshot(state.session_id, state.to_snapshot())


@settings(max_examples=500, deadline=None)
@given(state=_states(), events=st.lists(_EVENTS, max_size=6))
def test_check_of_a_batch_answers_as_each_event_checked_in_order(
    state: SessionState, events: list[AnyEvent]
) -> None:
    """``check`` (fast for a started session's plain messages) raises what ``check_each`` raises."""
    kept = state.to_snapshot()
    assert _outcome(lambda: state.check(events)) == _outcome(lambda: state.check_each(events))
    assert state.to_snapshot() == kept  # a check changes nothing


@settings(max_examples=500, deadline=None)
@given(state=_states(), events=st.lists(_EVENTS, max_size=6))
def test_apply_all_is_apply_of_each_event(state: SessionState, events: list[AnyEvent]) -> None:
    """``apply_all`` leaves the state (version, names, pending calls in order) of ``apply`` one by one."""
    one_by_one = _copy(state)
    for event in events:
        one_by_one.apply(event)
    state.apply_all(events)
    assert (state.to_snapshot(), state.pending_calls) == (one_by_one.to_snapshot(), one_by_one.pending_calls)


def test_plain_messages_of_a_started_session_pass_and_only_move_the_version() -> None:
    """A batch of user messages after the start passes the rules; applying it counts the events."""
    state = SessionState("s")
    state.version = 3
    state.calls.issue([("a", "ls")], 2)
    batch = [UserMessageAdded(content=InlineText(str(i))) for i in range(1000)]
    state.check(batch)
    state.apply_all(batch)
    assert (state.version, state.pending_calls) == (1003, ["a"])
