"""Forked sessions: the child reads the parent's prefix then its own events; the parent is never written."""

from __future__ import annotations

import re

import msgspec
import pytest
from contextledger import open_ledger
from contextledger.application.render.renderer import Renderer
from contextledger.domain.errors import SessionNotFoundError, UnknownToolCallError, ValidationError
from contextledger.domain.events import SessionStarted, ToolResultRecorded, UserMessageAdded


def _parent(ledger) -> str:
    """A parent of 7 events: task, a call and its result, a second call and result, a user follow-up."""
    session = ledger.start_session(system_prompt="be careful", model="m", tools=[{"name": "read_file"}])
    ledger.add_user_message(session, "fix the money tests")  # 2
    ledger.add_assistant_message(session, "look", tool_calls=[{"id": "c1", "name": "read_file"}])  # 3
    ledger.add_tool_result(session, "c1", "def add(a, b): return a - b")  # 4
    ledger.add_assistant_message(session, "again", tool_calls=[{"id": "c2", "name": "read_file"}])  # 5
    ledger.add_tool_result(session, "c2", "PARENT-ONLY result after the fork")  # 6
    ledger.add_user_message(session, "parent goes on")  # 7
    return session


def _encoded(ledger, session: str) -> bytes:
    return msgspec.json.encode(ledger.events(session))


def test_child_reads_parent_prefix_then_its_own_events(ledger):
    """Positions 1..P are the child's start plus the parent's 2..P; the child's own events follow at P+1."""
    parent = _parent(ledger)
    before = _encoded(ledger, parent)
    child = ledger.fork(parent, 4)
    assert ledger.add_user_message(child, "child asks something else") == 5
    events = ledger.events(child)
    assert [r.position for r in events] == [1, 2, 3, 4, 5]
    start = events[0].event
    assert isinstance(start, SessionStarted)
    assert start.session_id == child
    assert (start.parent.session_id, start.parent.position) == (parent, 4)
    assert start.system_prompt == "be careful"
    assert events[1:4] == ledger.events(parent, after=1, upto=4)
    assert isinstance(events[4].event, UserMessageAdded)
    assert [r.position for r in ledger.events(child, after=3, upto=5)] == [4, 5]
    assert ledger.version(child) == 5
    assert _encoded(ledger, parent) == before
    assert ledger.version(parent) == 7


def test_parent_events_byte_identical_in_sqlite(sqlite_url):
    """On SQLite, forking and writing to the child leaves the parent's stored events byte-identical."""
    with open_ledger(sqlite_url) as ledger:
        parent = _parent(ledger)
        before = _encoded(ledger, parent)
        child = ledger.fork(parent, 6)
        ledger.add_user_message(child, "child turn")
        ledger.pin(child, 4)
    with open_ledger(sqlite_url) as fresh:
        assert _encoded(fresh, parent) == before
        assert fresh.version(child) == 8
        assert [r.position for r in fresh.events(child)] == list(range(1, 9))


def test_pairing_rules_hold_across_the_seam(ledger):
    """A call issued before the fork point is answered in the child; others are refused."""
    parent = _parent(ledger)
    child = ledger.fork(parent, 5)  # c2 issued at 5, answered in the parent only at 6
    with pytest.raises(UnknownToolCallError):
        ledger.add_tool_result(child, "c9", "no such call")
    position = ledger.add_tool_result(child, "c2", "CHILD result of c2")
    assert position == 6
    with pytest.raises(ValidationError):
        ledger.add_tool_result(child, "c1", "c1 was answered in the prefix")
    context = Renderer(ledger, tokenizer="heuristic").render(child, "default")
    texts = [m.text for m in context.messages]
    assert "CHILD result of c2" in texts
    assert "PARENT-ONLY result after the fork" not in texts
    assert [m.tool_call_id for m in context.messages if m.role == "tool"] == ["c1", "c2"]


def test_render_of_child_is_parent_prefix_then_child(ledger):
    """The child's render holds the parent's messages through the fork point, then the child's own."""
    parent = _parent(ledger)
    child = ledger.fork(parent, 4)
    ledger.add_user_message(child, "child asks something else")
    renderer = Renderer(ledger, tokenizer="heuristic")
    child_texts = [m.text for m in renderer.render(child, "default").messages]
    parent_texts = [m.text for m in renderer.render(parent, "default", at=4).messages]
    assert child_texts == [*parent_texts, "child asks something else"]
    assert "parent goes on" not in child_texts


def test_fork_of_a_fork(ledger):
    """A grandchild reads the grandparent's prefix through the child's."""
    parent = _parent(ledger)
    child = ledger.fork(parent, 4)
    ledger.add_user_message(child, "child turn")  # 5
    grandchild = ledger.fork(child, 5)
    ledger.add_user_message(grandchild, "grandchild turn")  # 6
    texts = [
        ledger.text(r.event.content)
        for r in ledger.events(grandchild)
        if isinstance(r.event, UserMessageAdded)
    ]
    assert texts == ["fix the money tests", "child turn", "grandchild turn"]
    assert isinstance(ledger.events(grandchild, upto=4)[-1].event, ToolResultRecorded)


def test_versions_of_forks_are_their_virtual_heads(ledger):
    """``versions`` of a parent, forks with and without own events, and side streams equal ``version``."""
    parent = _parent(ledger)
    child = ledger.fork(parent, 4)
    grandchild = ledger.fork(child, 4)
    ledger.add_user_message(child, "child turn")
    streams = [parent, child, grandchild, f"{child}::summaries", "nobody"]
    found = ledger.log.versions(streams)
    assert found == {parent: 7, child: 5, grandchild: 4, f"{child}::summaries": 0, "nobody": 0}
    assert found == {s: ledger.log.version(s) for s in streams}


def test_fork_from_summary_starts_from_the_summary_in_force(ledger):
    """With from_summary the child renders the summary in force at the fork point, not what it covers.

    The keep_first head (the first turn) stays verbatim, as in any render of the default preset.
    """
    parent = _parent(ledger)  # turn 1: 2..6, turn 2 begins at 7
    ledger.add_assistant_message(parent, "third", tool_calls=[{"id": "c3", "name": "read_file"}])  # 8
    ledger.add_tool_result(parent, "c3", "TURN-TWO detail covered by the summary")  # 9
    ledger.add_user_message(parent, "and now?")  # 10
    summary = ledger.record_summary(
        parent, covers_from=2, covers_through=9, text="SUMMARY: add() subtracts", produced_at=10
    )
    child = ledger.fork(parent, 10, from_summary=True)
    [copied] = ledger.summaries(child)
    assert copied.previous_summary_id == summary.summary_id
    assert (copied.covers_from, copied.covers_through, copied.produced_at) == (2, 9, 10)
    assert ledger.summaries(parent) == [summary]
    context = Renderer(ledger, tokenizer="heuristic").render(child, "default")
    assert context.summary_id == copied.summary_id
    texts = [m.text for m in context.messages]
    assert any("SUMMARY: add() subtracts" in t for t in texts)
    assert "TURN-TWO detail covered by the summary" not in texts
    assert texts[-1] == "and now?"
    full = Renderer(ledger, tokenizer="heuristic").render(ledger.fork(parent, 10), "default")
    assert "TURN-TWO detail covered by the summary" in [m.text for m in full.messages]
    assert full.summary_id is None


def test_fork_refuses_bad_positions_and_missing_summary(ledger):
    """A position outside the parent, or from_summary without a summary in force, is a ValidationError."""
    parent = _parent(ledger)
    with pytest.raises(ValidationError):
        ledger.fork(parent, 8)
    with pytest.raises(ValidationError):
        ledger.fork(parent, 0)
    with pytest.raises(ValidationError):
        ledger.fork(parent, 4, from_summary=True)
    assert [info.session_id for info in ledger.sessions()] == [parent]


def test_fork_on_every_store(any_url):
    """On memory, SQLite and PostgreSQL a fork reads through to its parent and appends after the prefix."""
    with open_ledger(any_url) as ledger:
        parent = _parent(ledger)
        before = _encoded(ledger, parent)
        child = ledger.fork(parent, 5)
        assert ledger.add_tool_result(child, "c2", "child answer", idempotency_key="k1") == 6
        assert ledger.add_tool_result(child, "c2", "child answer", idempotency_key="k1") == 6  # a retry
        assert [r.position for r in ledger.events(child)] == [1, 2, 3, 4, 5, 6]
        assert _encoded(ledger, parent) == before


@pytest.mark.parametrize(
    ("parent", "error", "words"),
    [
        (("nope", 1), SessionNotFoundError, "no session 'nope'"),
        (("p", 50), ValidationError, "fork position 50 is outside session 'p' (1..2)"),
        (("p", 0), ValidationError, "fork position 0 is outside"),
        (("child", 1), ValidationError, "cannot be its own parent"),
        ("p", ValidationError, "a (session id, position) pair"),
        (("p", True), ValidationError, "a (session id, position) pair"),
    ],
)
def test_a_start_with_a_parent_that_cannot_be_read_is_refused_and_writes_nothing(parent, error, words):
    """``start_session(parent=...)`` stored any parent: itself, unknown, past its head, malformed.

    Every read or append of such a session failed for good, and one that was its own parent made every
    rebuild of the ledger fail with a RecursionError (the log keeps what it is given).
    """
    ledger = open_ledger("memory://")
    ledger.start_session(session_id="p", system_prompt="s")
    ledger.add_user_message("p", "hello")
    with pytest.raises(error, match=re.escape(words)):
        ledger.start_session(session_id="child", parent=parent)
    assert [s.session_id for s in ledger.sessions()] == ["p"]
    ledger.start_session(session_id="child", parent=("p", 2))
    assert [ledger.text(r.event.content) for r in ledger.events("child")[1:]] == ["hello"]


def test_sessions_counts_a_forks_events_as_its_positions_number_them(ledger):
    """``sessions`` said 2 events (the fork's start and one pin) of a fork ``show`` listed 11 of, no model.

    A fork of a fork counts both prefixes; both name the root's model, which they do not restate.
    """
    root = ledger.start_session(system_prompt="s", model="gpt-4o")
    for n in range(5):
        ledger.add_user_message(root, f"u{n}")
        ledger.add_assistant_message(root, f"a{n}")
    child = ledger.fork(root, 10)
    ledger.pin(child, 2)
    grandchild = ledger.fork(child, 11)
    ledger.add_user_message(grandchild, "more")
    infos = {info.session_id: info for info in ledger.sessions()}
    for session in (root, child, grandchild):
        assert infos[session].events == len(ledger.events(session)) == ledger.version(session)
        assert infos[session].model == "gpt-4o"
    assert infos[child].parent is not None
    assert (infos[child].parent.session_id, infos[child].parent.position) == (root, 10)
    assert infos[root].parent is None
