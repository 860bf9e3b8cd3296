"""Stored topics are stable and old payload versions are upcast on read."""

from __future__ import annotations

from typing import ClassVar

import contextledger
import msgspec
import pytest
from contextledger.adapters.store.mapper import MsgspecMapper
from contextledger.domain.content import InlineText
from contextledger.domain.events import (
    EVENT_TYPES,
    LedgerEvent,
    ToolResultRecorded,
    UserMessageAdded,
    topic_of,
)
from contextledger.domain.topics import TopicRegistry
from eventsourcing.persistence import StoredEvent


def test_topics_name_the_tag_and_version_not_the_module():
    """A topic is contextledger/<Tag>/v<N>: moving or renaming code cannot break stored data."""
    assert topic_of(UserMessageAdded) == "contextledger/UserMessageAdded/v1"
    for event_type in EVENT_TYPES:
        assert event_type.__module__ not in topic_of(event_type)


def test_every_event_type_round_trips_through_the_mapper():
    """Encoding then decoding returns an equal event."""
    mapper = MsgspecMapper()
    event = ToolResultRecorded(call_id="c1", tool_name="ls", content=InlineText("a\nb"), is_error=True)
    stored = mapper.to_stored("s1", 3, event)
    assert stored.topic == "contextledger/ToolResultRecorded/v1"
    recorded = mapper.to_recorded(stored)
    assert (recorded.seq, recorded.event) == (3, event)


class NoteV2(LedgerEvent, frozen=True, kw_only=True, tag="Note"):
    """Version 2 of a test event: ``text`` was renamed ``body`` and ``level`` added."""

    VERSION: ClassVar[int] = 2
    body: str
    level: str


class NoteV1(msgspec.Struct, kw_only=True, tag="Note", tag_field="type"):
    """How version 1 of the test event was written."""

    text: str


def test_old_payload_is_upcast_to_the_current_version():
    """A v1 payload stored under its v1 topic decodes as the v2 event through the registered upcaster."""
    registry = TopicRegistry([NoteV2])
    registry.add_upcaster("Note", 1, lambda p: {"body": p.pop("text"), "level": "info", **p})
    mapper = MsgspecMapper(registry)
    old = StoredEvent(
        originator_id="s1",
        originator_version=1,
        topic="contextledger/Note/v1",
        state=msgspec.msgpack.encode(NoteV1(text="hello")),
    )
    assert mapper.to_recorded(old).event == NoteV2(body="hello", level="info")


def test_missing_upcaster_is_a_decode_error():
    """Without an upcaster for an old version the read fails with a typed error."""
    mapper = MsgspecMapper(TopicRegistry([NoteV2]))
    old = StoredEvent("s1", 1, "contextledger/Note/v1", msgspec.msgpack.encode(NoteV1(text="x")))
    with pytest.raises(contextledger.EventDecodeError, match="no upcaster"):
        mapper.to_recorded(old)


@pytest.mark.parametrize(
    "topic",
    ["ledger:AgentSession.Started", "contextledger/Unknown/v1", "contextledger/UserMessageAdded/v9"],
)
def test_unknown_topics_are_decode_errors(topic):
    """Foreign, unknown or future topics raise EventDecodeError."""
    with pytest.raises(contextledger.EventDecodeError):
        MsgspecMapper().to_recorded(StoredEvent("s1", 1, topic, b"\x80"))


def test_corrupt_payload_is_a_decode_error():
    """A payload that does not decode raises EventDecodeError naming the event."""
    stored = StoredEvent("s1", 4, "contextledger/UserMessageAdded/v1", b"\xc1garbage")
    with pytest.raises(contextledger.EventDecodeError, match="s1@4"):
        MsgspecMapper().to_recorded(stored)
