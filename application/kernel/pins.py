"""Pins over the ledger's port: a pin carries its step group's events, so a render can bring it back."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec
from contextledger.application.kernel.session_port import SessionLedger
from contextledger.domain.errors import InvalidMessageError, ValidationError
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

__all__ = [
    "RESTORE_KEY",
    "check_pinnable",
    "pin",
    "pin_meta",
    "pin_span",
    "span_pins",
    "span_unpins",
    "step_group",
    "unpin",
    "unpin_span",
]

_CHUNK = 500
"""Events read per step while looking for a result's call or a call's results."""

_MAX_SCAN = 20_000
"""How far after a call its results are looked for (a call never answered must not read the whole log)."""


def _owner(ledger: SessionLedger, session_id: str, position: int, call_id: str) -> Recorded | None:
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


def _results(ledger: SessionLedger, session_id: str, owner: Recorded, head: int) -> list[Recorded]:
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


def step_group(ledger: SessionLedger, session_id: str, position: int) -> list[Recorded]:
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


def pin_meta(ledger: SessionLedger, session_id: str, position: int) -> dict[str, Any]:
    """Return the ``meta`` of a pin of ``position``: the step group's events, as builtins."""
    group = step_group(ledger, session_id, position)
    return {RESTORE_KEY: msgspec.to_builtins(group)} if group else {}


_MESSAGES = (UserMessageAdded, AssistantMessageAdded, ToolResultRecorded)


def check_pinnable(ledger: SessionLedger, session_id: str, position: int) -> None:
    """Refuse a pin of a position the session does not have, or of an event that is no message.

    A pin of a pin, of an unpin or of the session's start was written (and kept for good) though no render
    could show it differently; ``pin_span`` skips such events, and ``pin --dry-run`` approved any position.

    Raises:
        InvalidMessageError: naming the position and what it holds.
    """
    _check_inside(ledger, session_id, position)
    [recorded] = ledger.events(session_id, after=position - 1, upto=position)
    if not isinstance(recorded.event, _MESSAGES):
        kind = type(recorded.event).__name__
        raise InvalidMessageError(
            f"position {position} holds a {kind} event, not a message: only messages are pinned"
        )


def _check_inside(ledger: SessionLedger, session_id: str, position: int) -> None:
    head = ledger.version(session_id)
    if not 1 <= position <= head:
        raise InvalidMessageError(f"position {position} is outside session {session_id!r} (1..{head})")


def _check_span(ledger: SessionLedger, session_id: str, first: int, last: int) -> None:
    """Refuse a span that is not inside the session: a pin of positions it never had would say nothing."""
    head = ledger.version(session_id)
    if not 1 <= first <= last <= head:
        raise ValidationError(f"span {first}-{last} is outside session {session_id!r} (1..{head})")


def span_pins(ledger: SessionLedger, session_id: str, first: int, last: int, reason: str) -> list[AnyEvent]:
    """Return one pin per message of ``first..last`` (undoing a compaction of that span), groups read once.

    Raises:
        ValidationError: the span reaches past the session's head (nothing is pinned).
    """
    _check_span(ledger, session_id, first, last)
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


def span_unpins(ledger: SessionLedger, session_id: str, first: int, last: int) -> list[AnyEvent]:
    """Return one unpin per pin in force of ``first..last`` (a position pinned twice is unpinned twice).

    Raises:
        ValidationError: the span reaches past the session's head (nothing is unpinned).
    """
    _check_span(ledger, session_id, first, last)
    counts = pins_in_force(ledger, session_id, range(first, last + 1))
    return [ItemUnpinned(position=p) for p in sorted(counts) for _ in range(counts[p])]


def pin(ledger: SessionLedger, session_id: str, position: int, reason: str = "", **options: Any) -> int:
    """Pin the event at ``position``: the next render shows it verbatim and no reducer evicts it.

    A stubbed, truncated, dropped or summarized event comes back (within the budget: if the pinned
    items cannot fit, rendering raises ``PinnedOverBudgetError``). The pin carries the events of the
    pinned step group (``meta["restore"]``), so a render can re-admit a group it dropped. Returns
    the pin's position; ``unpin`` reverses it. ``options``: ``expected_version``, ``idempotency_key``.
    """

    def build() -> list[AnyEvent]:
        check_pinnable(ledger, session_id, position)
        return [ItemPinned(position=position, reason=reason, meta=pin_meta(ledger, session_id, position))]

    return ledger.append_built(session_id, build, **options)[0]


def pins_in_force(ledger: SessionLedger, session_id: str, positions: Iterable[int]) -> dict[int, int]:
    """How many pins of each of ``positions`` are in force (pins less unpins; a count never below 0).

    Reads the session's pins and unpins (one pass over its log: pinning is a user's act, not a loop's).
    """
    wanted = set(positions)
    counts = dict.fromkeys(wanted, 0)
    for recorded in ledger.events(session_id):
        event = recorded.event
        if isinstance(event, ItemPinned | ItemUnpinned) and event.position in wanted:
            step = 1 if isinstance(event, ItemPinned) else -1
            counts[event.position] = max(0, counts[event.position] + step)  # the fold ignores a spare unpin
    return counts


def unpin(ledger: SessionLedger, session_id: str, position: int, **options: Any) -> int:
    """Lift a pin; return the position of the unpin event.

    Raises:
        InvalidMessageError: no pin of ``position`` is in force (an unpin would change nothing, for good).
    """

    def build() -> list[AnyEvent]:
        _check_inside(ledger, session_id, position)
        if not pins_in_force(ledger, session_id, (position,))[position]:
            raise InvalidMessageError(
                f"position {position} of session {session_id!r} is not pinned: nothing to unpin"
            )
        return [ItemUnpinned(position=position)]

    return ledger.append_built(session_id, build, **options)[0]


def pin_span(
    ledger: SessionLedger, session_id: str, first: int, last: int, reason: str = "", **options: Any
) -> tuple[int, ...]:
    """Pin every message of ``first..last`` in one transaction (e.g. undo a compaction); return the pins.

    Each comes back verbatim in the next render, as with ``pin``; ``unpin_span`` reverses it.
    """
    return ledger.append_built(
        session_id, lambda: span_pins(ledger, session_id, first, last, reason), **options
    )


def unpin_span(
    ledger: SessionLedger, session_id: str, first: int, last: int, **options: Any
) -> tuple[int, ...]:
    """Lift the pins of every message of ``first..last`` in one transaction; return the unpins."""
    return ledger.append_built(session_id, lambda: span_unpins(ledger, session_id, first, last), **options)
