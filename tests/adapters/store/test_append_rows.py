"""A batch's CPU paths (ADR 0048) draft, encode and store what the definitions they stand for do."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import contextledger
import msgspec
import pytest
from contextledger.adapters.store.mapper import MsgspecMapper
from contextledger.adapters.store.sqlite import SQLiteRecorder
from contextledger.application.kernel.drafting import EventDrafter
from contextledger.application.kernel.messages import parse_for_append
from contextledger.application.kernel.rules_cache import RULES_SNAPSHOT_EVERY
from contextledger.domain.content import InlineText
from contextledger.domain.errors import InvalidMessageError
from contextledger.domain.events import (
    AnyEvent,
    AssistantMessageAdded,
    ItemPinned,
    ToolCall,
    ToolResultRecorded,
    UserMessageAdded,
)
from contextledger.domain.session import SessionState
from contextledger.testing import CountingIds, FixedClock
from hypothesis import given, settings
from hypothesis import strategies as st

_TEXTS = st.one_of(
    st.text(max_size=6),
    st.text(alphabet=st.characters(codec=None, exclude_categories=()), min_size=1, max_size=12),
    st.integers(min_value=0, max_value=40).map(lambda n: "é" * n),
)


@st.composite
def _messages(draw: st.DrawFn) -> object:
    """Plain user and tool dicts (texts around the blob threshold) and richer shapes of every role."""
    kind = draw(st.sampled_from(["user", "user", "tool", "model", "assistant", "unknown"]))
    text = draw(_TEXTS)
    if kind == "user":
        return {"role": "user", "content": text}
    if kind == "tool":
        return {"role": "tool", "call_id": draw(st.sampled_from(["c1", "c2"])), "content": text}
    if kind == "model":
        return {"role": "user", "content": text, "meta": {"time": "unknown"}}
    if kind == "assistant":
        return {"role": "assistant", "content": text, "tool_calls": [{"id": "c2", "name": "run"}]}
    return {"role": "user", "content": text, "at": "2026-01-01T00:00:00+00:00"}


def _drafting(threshold: int, messages: list[object], batch: bool) -> object:
    """The events (and their bytes, blobs and clock's next reading) of one batch, or the error."""
    state = SessionState("s")
    state.version = 2
    state.calls.issue([("c1", "read")], 2)
    clock = FixedClock()
    drafter = EventDrafter(clock, threshold)
    blobs: dict[str, str] = {}
    issued: dict[str, str] = {}
    try:
        parsed = parse_for_append(messages)
        events = (
            drafter.events(parsed, state, issued, blobs)
            if batch
            else [drafter.event(m, state, issued, blobs) for m in parsed]
        )
    except InvalidMessageError as error:
        return ("error", str(error))
    return [_encoded(e) for e in events], events, blobs, issued, clock.now()


def _encoded(event: AnyEvent) -> object:
    """The event's bytes, or the error its encoding raises (a lone surrogate: the store refuses it)."""
    try:
        return msgspec.msgpack.encode(event)
    except UnicodeEncodeError as error:
        return str(error)


@settings(max_examples=400, deadline=None)
@given(threshold=st.integers(min_value=-2, max_value=30), messages=st.lists(_messages(), max_size=6))
def test_drafting_a_batch_is_drafting_each_message(threshold: int, messages: list[object]) -> None:
    """``EventDrafter.events`` drafts the events, bytes, blobs and clock readings of ``event`` one by one."""
    assert _drafting(threshold, messages, batch=True) == _drafting(threshold, messages, batch=False)


_EVENTS = st.one_of(
    st.builds(lambda t: UserMessageAdded(content=InlineText(t)), st.text(max_size=4)),
    st.builds(lambda m: UserMessageAdded(content=InlineText("x"), meta=m), st.just({"o": object()})),
    st.builds(lambda: AssistantMessageAdded(tool_calls=(ToolCall(id="a", name="ls"),))),
    st.builds(lambda: ToolResultRecorded(call_id="a", tool_name="ls", content=InlineText("r"))),
    st.builds(lambda p: ItemPinned(position=p), st.integers(min_value=1, max_value=9)),
    st.integers(min_value=120, max_value=130).map(
        lambda depth: ItemPinned(position=1, meta={"deep": _nested(depth)})
    ),
)


def _nested(depth: int) -> object:
    """A list ``depth`` levels deep."""
    value: object = []
    for _ in range(depth - 1):
        value = [value]
    return value


def _rows_or_error(build: object) -> object:
    """What ``build()`` returns, or the type and text of what it raised."""
    try:
        return build()  # type: ignore[operator]
    except (InvalidMessageError, TypeError, ValueError, msgspec.EncodeError) as error:
        return (type(error), str(error))


@settings(max_examples=300, deadline=None)
@given(events=st.lists(_EVENTS, max_size=6))
def test_rows_of_a_mixed_batch_are_each_events_row(events: list[AnyEvent]) -> None:
    """``rows_many`` of events of several types (too deep, unencodable) equals the event-by-event rows."""
    mapper = MsgspecMapper()
    one_by_one = _rows_or_error(lambda: [mapper._checked_row("s", at, e) for at, e in enumerate(events, 4)])
    assert _rows_or_error(lambda: mapper.rows_many("s", 4, events)) == one_by_one
    stored = _rows_or_error(lambda: mapper.to_stored_many("s", 4, events))
    if isinstance(stored, list):
        stored = [(s.originator_id, s.originator_version, s.topic, s.state) for s in stored]
    assert stored == one_by_one


def _tables(path: Path) -> list[object]:
    """Every row of the events and snapshots tables (notification ids included)."""
    with sqlite3.connect(path) as conn:
        return [
            conn.execute("SELECT rowid, * FROM ledger_events ORDER BY rowid").fetchall(),
            conn.execute("SELECT * FROM ledger_snapshots ORDER BY name").fetchall(),
        ]


def _write(path: Path) -> list[object]:
    """Batches of plain, rich and tool messages (one reaching a rules snapshot) into a new SQLite ledger."""
    with contextledger.open_ledger(f"sqlite:///{path}", clock=FixedClock(), ids=CountingIds()) as ledger:
        session_id = ledger.start_session(system_prompt="rows", messages=[{"role": "user", "content": "a"}])
        ledger.append_many(
            session_id,
            [{"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "read"}]}],
        )
        ledger.append_many(session_id, [{"role": "tool", "call_id": "c1", "content": "r" * 9000}])
        plain = [{"role": "user", "content": str(i)} for i in range(RULES_SNAPSHOT_EVERY)]
        ledger.append_many(session_id, plain)
        ledger.append(session_id, {"role": "user", "content": "one"}, idempotency_key="k")
        with pytest.raises(InvalidMessageError):
            ledger.append_many(session_id, [{"role": "user", "content": "x", "meta": {"d": _nested(130)}}])
    return _tables(path)


def test_sqlite_stores_the_rows_of_its_stored_events_byte_for_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Appends through ``insert_rows`` store the tables that the ``StoredEvent`` path stores."""
    calls: list[int] = []
    insert_rows = SQLiteRecorder.insert_rows

    def counted(recorder: SQLiteRecorder, events: list[tuple[Any, ...]], **extras: object) -> object:
        calls.append(len(events))
        return insert_rows(recorder, events, **extras)

    monkeypatch.setattr(SQLiteRecorder, "insert_rows", counted)
    with_rows = _write(tmp_path / "rows.db")
    assert calls == [2, 1, 1, RULES_SNAPSHOT_EVERY, 1]  # the start with its message, then each append
    monkeypatch.delattr(SQLiteRecorder, "insert_rows")  # the store falls back to ``insert_events``
    assert _write(tmp_path / "stored.db") == with_rows
