"""MessagePack mapping of domain events to eventsourcing ``StoredEvent`` rows, with upcasting."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from itertools import repeat, starmap
from typing import Any, get_args

import msgspec
from contextledger.domain.errors import EventDecodeError, InvalidMessageError
from contextledger.domain.events import AnyEvent, LedgerEvent, Recorded
from contextledger.domain.limits import MAX_DEPTH, MAX_STORED_DEPTH, any_too_deep, too_deep
from contextledger.domain.topics import TopicRegistry, default_registry
from eventsourcing.persistence import StoredEvent

__all__ = ["MsgspecMapper", "Row"]

Row = tuple[str, int, str, bytes]
"""A stored event as a tuple: ``(stream id, position, topic, state)``, the fields of a ``StoredEvent``."""


class MsgspecMapper:
    """Encodes events as MessagePack under their stable topic and decodes them back, typed.

    eventsourcing 9.5 ships only a JSON transcoder (about 3x slower to decode); this mapper
    replaces it at the recorder boundary. Payloads of an older version are decoded untyped,
    upcast through the registry, then converted to the current event class.

    An event nested deeper than ``MAX_STORED_DEPTH`` is refused before encoding (``InvalidMessageError``),
    so no stored event is too deep to decode again; a row that still fails to decode is an
    ``EventDecodeError``.
    """

    def __init__(self, registry: TopicRegistry | None = None) -> None:
        self.registry = registry or default_registry()
        self._encoder = msgspec.msgpack.Encoder()
        self._decoders: dict[type[LedgerEvent], msgspec.msgpack.Decoder[Any]] = {}
        self._lists: dict[type[LedgerEvent], msgspec.msgpack.Decoder[Any]] = {}
        """Decoders of a list of one event type: a batch's payloads are checked in one call."""
        self._untyped = msgspec.msgpack.Decoder()
        self._current: dict[str, msgspec.msgpack.Decoder[Any]] = {}
        """Decoders of topics that name their class's current version (no upcast): one lookup per row."""
        self._topics: dict[type[LedgerEvent], str] = {}
        """The registry's topic of each event type met (a topic names a type and its version)."""
        self._batch = msgspec.msgpack.Decoder(list[AnyEvent])
        self._batch_types: dict[str, type[LedgerEvent]] = {}
        """The type of each topic ``decode_batch`` takes: a current version of a member of ``AnyEvent``."""
        self.unseal: Callable[[str, str, bytes], bytes] | None = None
        """Decrypts a stored payload (stream, topic, bytes) of an encrypted ledger; None in plaintext."""

    def to_stored(self, stream_id: str, position: int, event: LedgerEvent) -> StoredEvent:
        """Return the row that stores ``event`` at ``position`` of ``stream_id`` (``to_stored_many``)."""
        return self.to_stored_many(stream_id, position, [event])[0]

    def to_stored_many(self, stream_id: str, first: int, events: Sequence[LedgerEvent]) -> list[StoredEvent]:
        """Return the rows that store ``events`` at ``first``, ``first + 1``, ... of ``stream_id``.

        The rows of ``rows_many``, each a ``StoredEvent``. One event is checked alone (``too_deep``'s
        fast path is quicker than the batch walk).

        Raises:
            InvalidMessageError: an event nests values deeper than the store keeps.
        """
        if len(events) == 1:
            return [_stored_event(*self._checked_row(stream_id, first, events[0]))]
        return list(starmap(_stored_event, self.rows_many(stream_id, first, events)))

    def rows_many(self, stream_id: str, first: int, events: Sequence[LedgerEvent]) -> list[Row]:
        """The ``(stream, position, topic, state)`` rows of ``events`` at ``first``, ``first + 1``, ...

        The depth of a batch of several events is checked at once (``any_too_deep``; one event alone with
        ``too_deep``, whose fast path is quicker than the batch walk); when some event is too deep, the
        events are checked and encoded one by one, so the first fault met in order is the one raised.
        Otherwise the rows are zipped in C: per row its topic, then its encoding, in order, as one by one.
        Every payload is then checked to decode as its own type (a batch of one type in one call), so no
        event the store could not read back is written; an encoding that fails, or a payload that does not
        decode, is found again one by one, so the first fault in order is the one raised.

        Raises:
            InvalidMessageError: an event nests values deeper than the store keeps, holds a value the
                encoder refuses, or a field of the wrong type.
        """
        if len(events) == 1:
            return [self._checked_row(stream_id, first, events[0])]
        if any_too_deep(events, MAX_STORED_DEPTH):
            return [
                self._checked_row(stream_id, position, event) for position, event in enumerate(events, first)
            ]
        count = len(events)
        kinds = {*map(type, events)}
        one = next(iter(kinds)) if len(kinds) == 1 else None
        topics = (
            repeat(self._topic(events[0]), count)  # one type: its topic, as each event's lookup gives it
            if one is not None
            else map(self._topic, events)
        )
        try:
            states = list(map(self._encoder.encode, events))
        except (TypeError, ValueError, OverflowError, msgspec.EncodeError):  # one by one: the first fault
            return [
                self._checked_row(stream_id, position, event) for position, event in enumerate(events, first)
            ]
        if one is None or not self._all_decode(one, states):
            for position, (event, state) in enumerate(zip(events, states, strict=True), first):
                self._check_decodes(stream_id, position, event, state)
        return list(zip(repeat(stream_id, count), range(first, first + count), topics, states, strict=True))

    def _checked_row(self, stream_id: str, position: int, event: LedgerEvent) -> Row:
        """The row of one event, refused first when it nests too deep or would not decode as its type."""
        if too_deep(event, MAX_STORED_DEPTH):
            msg = (
                f"a {type(event).__name__} of {stream_id!r} nests lists and objects too deep to store: "
                f"values (metadata, meta, arguments, parameters) may nest at most {MAX_DEPTH} levels"
            )
            raise InvalidMessageError(msg)
        state = self._encoder.encode(event)
        self._check_decodes(stream_id, position, event, state)
        return (stream_id, position, self._topic(event), state)

    def _decoder(self, event_type: type[LedgerEvent]) -> msgspec.msgpack.Decoder[Any]:
        """The typed decoder of ``event_type`` (made once per type)."""
        decoder = self._decoders.get(event_type)
        if decoder is None:
            decoder = self._decoders[event_type] = msgspec.msgpack.Decoder(event_type)
        return decoder

    def _all_decode(self, event_type: type[LedgerEvent], states: list[bytes]) -> bool:
        """Whether payloads of one type all decode as it again, checked in one call."""
        decoder = self._lists.get(event_type)
        if decoder is None:
            decoder = self._lists[event_type] = msgspec.msgpack.Decoder(list[event_type])  # type: ignore[valid-type]
        try:
            decoder.decode(b"\xdd" + len(states).to_bytes(4, "big") + b"".join(states))
        except msgspec.DecodeError:
            return False
        return True

    def _check_decodes(self, stream_id: str, position: int, event: LedgerEvent, state: bytes) -> None:
        """Refuse an event whose payload would not decode as its own type (a field given a wrong type).

        Events are not validated when built (``msgspec.Struct``), so ``pin(reason=None)`` or a fork at
        position 1.5 encoded fine and then failed every read of the session (and of ``sessions()``):
        the log held an event no reader could take. Checked here, nothing is written.

        Raises:
            InvalidMessageError: naming the event, its place and the field at fault.
        """
        try:
            self._decoder(type(event)).decode(state)
        except msgspec.DecodeError as error:
            name = type(event).__name__
            msg = f"a {name} for {stream_id!r}@{position} holds a value of the wrong type: {error}"
            msg += "; nothing was written"
            raise InvalidMessageError(msg) from None

    def _topic(self, event: LedgerEvent) -> str:
        """The registry's topic of the event's type (remembered per type)."""
        topic = self._topics.get(type(event))
        if topic is None:
            topic = self._topics[type(event)] = self.registry.topic(event)
        return topic

    def to_recorded(self, stored: StoredEvent) -> Recorded:
        """Decode a stored row into a ``Recorded`` event, upcasting older payloads."""
        event = self.decode(stored.originator_id, stored.originator_version, stored.topic, stored.state)
        return Recorded(stored.originator_version, event)

    def decode(self, stream_id: object, position: int, topic: str, state: bytes) -> AnyEvent:
        """Decode one stored row's payload (its stream and position name it in errors)."""
        if self.unseal is not None:
            state = self.unseal(str(stream_id), topic, state)
        decoder = self._current.get(topic)
        try:
            if decoder is not None:
                return _as_any(decoder.decode(state))
            event_type, version = self.registry.resolve(topic)
            if version == event_type.VERSION:
                decoder = self._decoder(event_type)
                self._current[topic] = decoder
                event = decoder.decode(state)
            else:
                payload = self._untyped.decode(state)
                tag = str(event_type.__struct_config__.tag)
                payload = self.registry.upcast(tag, version, event_type.VERSION, payload)
                payload["type"] = tag
                event = msgspec.convert(payload, event_type)
        except (msgspec.DecodeError, RecursionError) as error:  # ValidationError is a DecodeError
            msg = f"stored event {stream_id}@{position} ({topic}) does not decode: {error}"
            raise EventDecodeError(msg) from error
        return _as_any(event)

    def decode_batch(self, topics: Sequence[str], states: bytes) -> list[AnyEvent] | None:
        """Decode the payloads of rows with ``topics``, joined in ``states``, in one call; or None.

        None when the ledger is encrypted, when a topic is not a current version of a type of
        ``AnyEvent`` (``decode`` upcasts those, one by one), or when the payloads do not decode as
        exactly those types, in that order: then ``decode``, row by row, says which row is at fault.
        """
        if self.unseal is not None:
            return None
        types = self._batch_types
        for topic in set(topics).difference(types):
            found = _batch_type(self.registry, topic)
            if found is None:
                return None
            types[topic] = found
        header = b"\xdd" + len(topics).to_bytes(4, "big")  # a MessagePack array of that many items
        try:
            events: list[AnyEvent] = self._batch.decode(header + states)
        except (msgspec.DecodeError, RecursionError):
            return None
        if list(map(type, events)) != list(map(types.__getitem__, topics)):
            return None
        return events


def _batch_type(registry: TopicRegistry, topic: str) -> type[LedgerEvent] | None:
    """The type ``decode_batch`` decodes a topic's payloads as, or None (an older version, another type)."""
    try:
        event_type, version = registry.resolve(topic)
    except EventDecodeError:
        return None
    current = version == event_type.VERSION and event_type in get_args(AnyEvent)
    return event_type if current else None


def _stored_event(stream_id: str, position: int, topic: str, state: bytes) -> StoredEvent:
    """``StoredEvent(stream_id, position, topic, state)``, its fields written as its ``__init__`` writes them.

    eventsourcing's ``StoredEvent`` is a frozen dataclass: its generated ``__init__`` sets each field with
    ``object.__setattr__``, a call per field per row. When it has an instance ``__dict__`` and no
    ``__post_init__`` (checked once, below), the same four entries are written into a new instance's
    ``__dict__`` at once; otherwise the constructor is called.
    """
    if not _DIRECT:
        return StoredEvent(stream_id, position, topic, state)
    stored = _new(StoredEvent)
    stored.__dict__.update(originator_id=stream_id, originator_version=position, topic=topic, state=state)
    return stored


_new = object.__new__
_DIRECT = (
    dataclasses.is_dataclass(StoredEvent)
    and [f.name for f in dataclasses.fields(StoredEvent)]
    == ["originator_id", "originator_version", "topic", "state"]
    and not hasattr(StoredEvent, "__slots__")
    and not hasattr(StoredEvent, "__post_init__")
)


def _as_any(event: LedgerEvent) -> AnyEvent:
    return event  # type: ignore[return-value]  # every registered type is a member of AnyEvent
