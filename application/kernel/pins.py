"""What a pin carries: the events of the pinned step group, so a render can bring a dropped group back."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec
from contextledger.domain.events import (
    AnyEvent,
    AssistantMessageAdded,
    ItemPinned,
    ItemUnpinned,
    Recorded,
    ToolResultRecorded,
    UserMessageAdded,
)
from contextledger.projections.restore import RESTORE_KEY

if TYPE_CHECKING:
    from contextledger.application.kernel.ledger import Ledger

__all__ = ["RESTORE_KEY", "pin_meta", "span_pins", "span_unpins", "step_group"]

_CHUNK = 500
"""Events read per step while looking for a result's call or a call's results."""

_MAX_SCAN = 20_000
"""How far after a call its results are looked for (a call never answered must not read the whole log)."""


def _owner(ledger: Ledger, session_id: str, position: int, call_id: str) -> Recorded | None:
    """Return the assistant message before ``position`` that issued ``call_id`` (read backwards)."""
    upto = position - 1
    while upto > 0:
        after = max(0, upto - _CHUNK)
        for recorded in reversed(ledger.events(session_id, after=after, upto=upto)):
            event = recorded.event
            if isinstance(event, AssistantMessageAdded) and any(c.id == call_id for c in event.tool_calls):
                return recorded
        upto = after
    return None


def _results(ledger: Ledger, session_id: str, owner: Recorded, head: int) -> list[Recorded]:
    """Return the results of ``owner``'s calls logged up to ``head`` (read forwards until all are found)."""
    assert isinstance(owner.event, AssistantMessageAdded)  # noqa: S101 - the caller passes an assistant message
    waiting = {c.id for c in owner.event.tool_calls}
    found: list[Recorded] = []
    after = owner.position
    limit = min(head, owner.position + _MAX_SCAN)
    while waiting and after < limit:
        upto = min(limit, after + _CHUNK)
        for recorded in ledger.events(session_id, after=after, upto=upto):
            event = recorded.event
            if isinstance(event, ToolResultRecorded) and event.call_id in waiting:
                waiting.discard(event.call_id)
                found.append(recorded)
        after = upto
    return found


def step_group(ledger: Ledger, session_id: str, position: int) -> list[Recorded]:
    """Return the events of the step group at ``position``: a user message, or a call with its results."""
    head = ledger.version(session_id)
    if not 1 <= position <= head:
        return []
    [recorded] = ledger.events(session_id, after=position - 1, upto=position)
    event = recorded.event
    if isinstance(event, UserMessageAdded):
        return [recorded]
    owner: Recorded | None = recorded if isinstance(event, AssistantMessageAdded) else None
    if isinstance(event, ToolResultRecorded):
        owner = _owner(ledger, session_id, position, event.call_id)
        if owner is None:
            return []
    if owner is None:
        return []
    return [owner, *_results(ledger, session_id, owner, head)]


def pin_meta(ledger: Ledger, session_id: str, position: int) -> dict[str, Any]:
    """Return the ``meta`` of a pin of ``position``: the step group's events, as builtins."""
    group = step_group(ledger, session_id, position)
    return {RESTORE_KEY: msgspec.to_builtins(group)} if group else {}


_MESSAGES = (UserMessageAdded, AssistantMessageAdded, ToolResultRecorded)


def span_pins(ledger: Ledger, session_id: str, first: int, last: int, reason: str) -> list[AnyEvent]:
    """Return one pin per message of ``first..last`` (undoing a compaction of that span), groups read once."""
    pins: list[AnyEvent] = []
    groups: dict[int, list[Recorded]] = {}
    for recorded in ledger.events(session_id, after=first - 1, upto=last):
        if not isinstance(recorded.event, _MESSAGES):
            continue
        group = next((g for g in groups.values() if any(r.position == recorded.position for r in g)), None)
        if group is None:
            group = step_group(ledger, session_id, recorded.position)
            if group:
                groups[group[0].position] = group
        meta = {RESTORE_KEY: msgspec.to_builtins(group)} if group else {}
        pins.append(ItemPinned(position=recorded.position, reason=reason, meta=meta))
    return pins


def span_unpins(ledger: Ledger, session_id: str, first: int, last: int) -> list[AnyEvent]:
    """Return one unpin per message of ``first..last``."""
    return [
        ItemUnpinned(position=r.position)
        for r in ledger.events(session_id, after=first - 1, upto=last)
        if isinstance(r.event, _MESSAGES)
    ]
