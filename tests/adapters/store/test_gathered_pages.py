"""Pages SQLite gathers into one row (ADR 0072): read as a row-by-row read reads them, or read row by row."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from contextledger.adapters.store.event_store import RecorderEventStore
from contextledger.adapters.store.factory import open_store
from contextledger.adapters.store.mapper import MsgspecMapper
from contextledger.adapters.store.notification_scan import NotificationScan, batch_of, joined_rows
from contextledger.adapters.store.projections import RecorderProjections
from contextledger.adapters.store.sealing import TOMBSTONE_TOPIC
from contextledger.domain.content import InlineText
from contextledger.domain.errors import EventDecodeError
from contextledger.domain.events import (
    AssistantMessageAdded,
    SessionStarted,
    ToolCall,
    ToolResultRecorded,
    UserMessageAdded,
)
from contextledger.domain.ports import Notification
from contextledger.testing import FixedClock

_AT = FixedClock().now()


def _session(session_id: str, turns: int) -> list[object]:
    events: list[object] = [SessionStarted(session_id=session_id, at=_AT, model="m", system_prompt="sys")]
    for turn in range(turns):
        call = ToolCall(id=f"{session_id}-c{turn}", name="grep", arguments='{"q": "\\u00e9"}')
        events += [
            UserMessageAdded(content=InlineText(f"ask {turn} \x00 é"), at=_AT),
            AssistantMessageAdded(content=InlineText(""), tool_calls=(call,), at=_AT),
            ToolResultRecorded(call_id=call.id, tool_name="grep", content=InlineText("x" * turn), at=_AT),
        ]
    return events


@pytest.fixture
def store(sqlite_url: str) -> Iterator[RecorderEventStore]:
    """A SQLite file holding three interleaved sessions of every message type."""
    opened = open_store(sqlite_url)
    sessions = {name: _session(name, turns) for name, turns in (("a", 4), ("b", 7), ("c", 2))}
    at = dict.fromkeys(sessions, 0)
    while any(at[name] < len(events) for name, events in sessions.items()):
        for name, events in sessions.items():
            if at[name] < len(events):
                opened.append(name, at[name], events[at[name] : at[name] + 2])  # type: ignore[arg-type]
                at[name] = min(at[name] + 2, len(events))
    yield opened
    opened.close()


def _by_rows(store: RecorderEventStore, after: int, limit: int) -> tuple[int, list[Notification]]:
    """The page as the row-by-row read reads it (the tables' rows, each decoded by the mapper)."""
    rows = store.recorder.notification_rows(after, limit)  # type: ignore[attr-defined]
    decode = store.mapper.decode
    notes = [Notification(i, s, p, decode(s, p, t, state)) for i, s, p, t, state in rows]
    return (rows[-1][0] if rows else 0), notes


@pytest.mark.parametrize("limit", [1, 2, 5, 1_000])
def test_every_gathered_page_is_the_page_read_row_by_row(store, limit):
    """Paging through the log gathered gives each page's last id and notifications as rows read one by one."""
    reader = RecorderProjections(store)
    assert reader._pages is not None
    after, pages = 0, 0
    while True:
        batch = reader.read_batch(after, limit)
        assert (batch.last_id, batch.notifications) == _by_rows(store, after, limit)
        if not batch.last_id:
            break
        after, pages = batch.last_id, pages + 1
    assert pages >= 40 // limit  # every event was paged: 43 events


def test_a_page_gathered_ahead_is_the_page_asked_for_and_another_is_dropped(store):
    """``scan_ahead`` of the next read gives that read's page; a read of another page gets its own."""
    reader = RecorderProjections(store)
    reader.scan_ahead(5, 4)
    assert reader.read_batch(5, 4) == reader.read_batch(5, 4)
    assert reader.read_batch(5, 4).notifications == _by_rows(store, 5, 4)[1]
    reader.scan_ahead(5, 4)
    assert reader.read_batch(9, 3).notifications == _by_rows(store, 9, 3)[1]  # not the page gathered
    reader.scan_ahead(0, 2)
    reader.end_scans()  # a page no read took: waited for and dropped
    assert reader.read_batch(0, 2).notifications == _by_rows(store, 0, 2)[1]


def _scan(store: RecorderEventStore, after: int, limit: int) -> NotificationScan:
    return store.recorder.notification_scan(after, limit)  # type: ignore[attr-defined, no-any-return]


def test_a_page_that_fails_a_check_is_left_to_the_row_by_row_read(store):
    """Counts that disagree, ids out of order, a short blob, a tombstone's topic: no page (rows are read)."""
    mapper = store.mapper
    scan = _scan(store, 0, 6)
    assert batch_of(scan, mapper, TOMBSTONE_TOPIC) is not None
    first, *rest = scan.streams.split("\x1f")
    ids = scan.ids.split(",")
    broken = {
        "a stream holding the separator": scan._replace(streams="\x1f".join([first + "\x1fx", *rest])),
        "ids out of order": scan._replace(ids=",".join([ids[1], ids[0], *ids[2:]])),
        "a short blob": scan._replace(states=scan.states[:-1]),
        "a tombstone": scan._replace(
            topics=scan.topics.replace(scan.topics.split("\x1f")[1], TOMBSTONE_TOPIC)
        ),
    }
    for why, page in broken.items():
        assert batch_of(page, mapper, TOMBSTONE_TOPIC) is None, why


def test_payloads_decode_at_once_only_as_exactly_their_topics_say(store):
    """A payload of another type than its topic, an older topic, a sealed ledger: decoded row by row."""
    scan = _scan(store, 0, 6)
    topics = scan.topics.split("\x1f")
    mapper = MsgspecMapper()
    assert mapper.decode_batch(topics, scan.states) is not None
    swapped = [topics[1], topics[0], *topics[2:]]  # a SessionStarted payload under a user message's topic
    assert topics[0] != topics[1]
    assert mapper.decode_batch(swapped, scan.states) is None
    older = [topics[0].replace("/v1", "/v0"), *topics[1:]]
    assert mapper.decode_batch(older, scan.states) is None
    assert mapper.decode_batch(topics, scan.states[:-3]) is None  # a cut payload
    mapper.unseal = lambda _stream, _topic, data: data
    assert mapper.decode_batch(topics, scan.states) is None


def test_a_row_that_does_not_decode_is_named_by_the_row_by_row_read(store, sqlite_url):
    """A gathered page with a broken payload is read again row by row, whose error names the row."""
    path = Path(sqlite_url.removeprefix("sqlite:///"))
    with sqlite3.connect(path) as db:
        db.execute(
            "UPDATE ledger_events SET state = x'c1' WHERE originator_id = 'b' AND originator_version = 2"
        )
    reader = RecorderProjections(store)
    with pytest.raises(EventDecodeError, match="b@2"):
        reader.read_batch(0, 100)


def test_rows_joined_by_sqlite_split_into_the_rows_read_one_by_one(store):
    """Projection rows read by keys come back whole, a key holding the separator too (read row by row)."""
    views = RecorderProjections(store)
    rows = {"k1": (1, b""), "k\x1f2": (2, b"\x00\x01two"), "k3": (3, msgspec.msgpack.encode(["three"]))}
    views.commit("p", 1, rows)
    assert views.load_rows("p", ["k1", "k3", "absent"]) == {"k1": rows["k1"], "k3": rows["k3"]}
    assert views.load_rows("p", list(rows)) == rows
    assert joined_rows(0, None, None, None, None) == {}
    assert joined_rows(2, "a\x1fb", "1,2", "1,1", b"xy") == {"a": (1, b"x"), "b": (2, b"y")}
    assert joined_rows(2, "a\x1fb\x1fc", "1,2", "1,1", b"xy") is None
    assert joined_rows(2, "a\x1fb", "1,2", "1,1", b"xyz") is None


def test_heads_and_row_keys_joined_in_one_row_are_those_read_row_by_row(store):
    """Streams' heads and a projection's sorted keys come back whole, ids holding the separator too."""
    assert store.recorder.stream_versions(["c", "a", "nobody", "b"]) == {"a": 13, "b": 22, "c": 7}
    assert store.recorder.stream_versions(["a\x1fb", "a"]) == {"a": 13}  # read row by row
    views = RecorderProjections(store)
    views.commit("p", 1, {"k2": (1, b"x"), "k\x1f1": (1, b"y"), "k1": (1, b"z")})
    assert views.row_keys("p") == ["k\x1f1", "k1", "k2"]  # code point order, as SQLite sorts
    views.commit("q", 1, {"b": (1, b"x"), "a": (1, b"y")})
    assert views.row_keys("q") == ["a", "b"]
    assert views.row_keys("none") == []
