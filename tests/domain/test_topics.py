"""Stored topics are stable and old payload versions are upcast on read."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar, get_args

import contextledger
import msgspec
import pytest
from contextledger.adapters.store.mapper import MsgspecMapper
from contextledger.domain.events import (
    EVENT_TYPES,
    AnyEvent,
    LedgerEvent,
    Recorded,
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


def _example(info: msgspec.inspect.Type, variant: int, name: str) -> Any:  # noqa: C901, PLR0911 - one branch per kind
    """Build a value of the inspected type; ``variant`` picks the union member (first or last non-None)."""
    kind = msgspec.inspect
    if isinstance(info, kind.StrType):
        return f"{name}-{variant} <s>[INST] x [/INST] é"
    if isinstance(info, kind.BoolType):
        return True
    if isinstance(info, kind.IntType):
        return 7 + variant
    if isinstance(info, kind.FloatType):
        return 0.5 + variant
    if isinstance(info, kind.DateTimeType):
        return datetime(2026, 1, 2, 3, 4, 5, 678_000 + variant, tzinfo=UTC)
    if isinstance(info, kind.DictType | kind.AnyType):
        return {"source_format": "test", "nested": {"n": [1, 2.5, None, "x"]}, "variant": variant}
    if isinstance(info, kind.VarTupleType | kind.ListType):
        items = [_example(info.item_type, variant, f"{name}{i}") for i in range(2)]
        return tuple(items) if isinstance(info, kind.VarTupleType) else items
    if isinstance(info, kind.TupleType):
        return tuple(_example(t, variant, f"{name}{i}") for i, t in enumerate(info.item_types))
    if isinstance(info, kind.UnionType):
        members = [t for t in info.types if not isinstance(t, kind.NoneType)]
        return _example(members[0] if variant == 0 else members[-1], variant, name)
    if isinstance(info, kind.LiteralType):
        return info.values[variant % len(info.values)]
    if isinstance(info, kind.StructType):
        return info.cls(**{f.name: _example(f.type, variant, f.name) for f in info.fields})
    raise NotImplementedError(info)  # a new field kind: teach the example builder about it


def example_event(event_type: type[LedgerEvent], variant: int) -> LedgerEvent:
    """Return an instance of ``event_type`` with every field set to a value that is not its default."""
    info = msgspec.inspect.type_info(event_type)
    assert isinstance(info, msgspec.inspect.StructType)
    event = _example(info, variant, event_type.__name__)
    for field in info.fields:
        value = getattr(event, field.name)
        default = field.default_factory() if field.default_factory is not msgspec.NODEFAULT else field.default
        assert value != default, f"{event_type.__name__}.{field.name} kept its default"
    return event


def test_event_types_are_the_members_of_any_event():
    """EVENT_TYPES is derived from AnyEvent: same types, same order, each tag once."""
    assert get_args(AnyEvent) == EVENT_TYPES
    tags = [t.__struct_config__.tag for t in EVENT_TYPES]
    assert len(tags) == len(set(tags)) == len(EVENT_TYPES) >= 7


@pytest.mark.parametrize("variant", [0, 1])
@pytest.mark.parametrize("event_type", EVENT_TYPES, ids=lambda t: t.__name__)
def test_every_event_type_round_trips_through_the_mapper(event_type, variant):
    """Each event type, every field set, encodes and decodes to an equal event: mapper, msgpack, JSON."""
    event = example_event(event_type, variant)
    mapper = MsgspecMapper()
    stored = mapper.to_stored("s1", 3, event)
    assert stored.topic == f"contextledger/{event_type.__struct_config__.tag}/v{event_type.VERSION}"
    recorded = mapper.to_recorded(stored)
    assert type(recorded.event) is event_type
    assert (recorded.position, recorded.event) == (3, event)
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(event), type=AnyEvent) == event
    assert msgspec.json.decode(msgspec.json.encode(event), type=AnyEvent) == event
    assert msgspec.json.decode(msgspec.json.encode(Recorded(3, event)), type=Recorded) == Recorded(3, event)


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
