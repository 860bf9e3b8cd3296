"""A retried append is a replay only if it carries what the first one stored; else a typed refusal."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
from contextledger.domain.errors import IdempotencyKeyReusedError, InvalidMessageError
from contextledger.domain.events import AnyEvent
from contextledger.domain.ports import EventLog

__all__ = ["check_replay", "content_of"]

_ENCODER = msgspec.msgpack.Encoder()

_VOLATILE = frozenset({"at"})
"""Fields a retry may legitimately change: the time an event was drafted (the clock moved on)."""


def content_of(event: AnyEvent) -> Any:
    """What an event says, without the fields a retry may change: the basis of the replay comparison.

    Read as its stored encoding reads back, so a value the store keeps as an array compares equal
    whether the event holds it as a tuple or (read back from the log) as a list: a pin's restore
    meta holds tuples when drafted, lists when stored, and its retry was refused as new content.
    """
    fields = msgspec.msgpack.decode(_ENCODER.encode(event))
    return {k: v for k, v in fields.items() if k not in _VOLATILE} | {"type": type(event).__name__}


def check_replay(
    log: EventLog, session_id: str, key: str, positions: Sequence[int], events: Sequence[AnyEvent]
) -> None:
    """Raise ``IdempotencyKeyReusedError`` unless ``events`` say what the key stored at ``positions``.

    The stored events are the content the key stands for: they are read back and compared field by
    field (``at`` aside), so every backend detects a reused key alike with no extra column.
    """
    try:
        retried = [content_of(e) for e in events]
    except UnicodeEncodeError as error:  # what the first write would have refused: not the same content
        msg = f"a message text must be valid UTF-8: {error.reason} at character {error.start}"
        raise InvalidMessageError(msg) from None
    stored = log.read(session_id, after=min(positions) - 1, upto=max(positions)) if positions else []
    if [content_of(r.event) for r in stored] != retried:
        raise IdempotencyKeyReusedError(session_id, key)
