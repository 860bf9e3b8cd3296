"""Stable topic names for stored events, and the upcasting path from older payload versions."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from contextledger.domain.errors import EventDecodeError
from contextledger.domain.events import EVENT_TYPES, LedgerEvent, topic_of

__all__ = ["TopicRegistry", "Upcaster", "default_registry"]

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]
"""Turns a stored payload of version N into the payload of version N + 1."""

_TOPIC = re.compile(r"^contextledger/(?P<tag>[A-Za-z0-9_]+)/v(?P<version>[0-9]+)$")


class TopicRegistry:
    """Maps stored topics to event classes and upgrades old payloads before they are typed.

    A topic is ``contextledger/<tag>/v<version>``: it names neither a module nor a class, so moving
    or renaming code never breaks stored data. When an event changes shape, raise its ``VERSION``
    and register an upcaster from the old version; stored payloads are upgraded on read.
    """

    def __init__(self, event_types: Iterable[type[LedgerEvent]] = EVENT_TYPES) -> None:
        self._by_tag: dict[str, type[LedgerEvent]] = {}
        self._upcasters: dict[tuple[str, int], Upcaster] = {}
        for event_type in event_types:
            self.register(event_type)

    def register(self, event_type: type[LedgerEvent]) -> None:
        """Add an event type; its tag must be unique in this registry."""
        tag = str(event_type.__struct_config__.tag)
        if tag in self._by_tag and self._by_tag[tag] is not event_type:
            msg = f"event tag {tag!r} is registered twice"
            raise ValueError(msg)
        self._by_tag[tag] = event_type

    def add_upcaster(self, tag: str, from_version: int, upcaster: Upcaster) -> None:
        """Register the step that upgrades ``tag`` payloads from ``from_version`` to the next."""
        self._upcasters[(tag, from_version)] = upcaster

    def topic(self, event: LedgerEvent) -> str:
        """Return the topic under which ``event`` is stored."""
        return topic_of(type(event))

    def resolve(self, topic: str) -> tuple[type[LedgerEvent], int]:
        """Return the event class and the stored version named by ``topic``."""
        match = _TOPIC.match(topic)
        if match is None:
            msg = f"stored topic {topic!r} is not a contextledger topic"
            raise EventDecodeError(msg)
        tag, version = match["tag"], int(match["version"])
        event_type = self._by_tag.get(tag)
        if event_type is None:
            msg = f"stored topic {topic!r} names an unknown event type {tag!r}"
            raise EventDecodeError(msg)
        if version > event_type.VERSION:
            msg = f"stored topic {topic!r} is newer than this code (v{event_type.VERSION})"
            raise EventDecodeError(msg)
        return event_type, version

    def upcast(self, tag: str, version: int, target: int, payload: dict[str, Any]) -> dict[str, Any]:
        """Run the upcasters of ``tag`` from ``version`` up to ``target``."""
        while version < target:
            step = self._upcasters.get((tag, version))
            if step is None:
                msg = f"no upcaster for {tag} v{version} -> v{version + 1}"
                raise EventDecodeError(msg)
            payload = step(payload)
            version += 1
        return payload


def default_registry() -> TopicRegistry:
    """Return a registry of every event type the ledger knows, with its upcasters."""
    return TopicRegistry()
