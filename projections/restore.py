"""Restore by pin: a pin brings its event back verbatim (stubbed, truncated or dropped); an unpin undoes it.

A stubbed or truncated entry still in the window gets its logged form back. A group the window no
longer holds (dropped, or covered by a summary) comes back from the pin event itself: ``Ledger.pin``
stores the events of the pinned step group in ``ItemPinned.meta["restore"]`` (texts inline, large
ones by blob address), so the fold stays a pure function of the log and keeps no evicted groups.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import msgspec
from contextledger.domain.content import InlineText, Text
from contextledger.domain.events import (
    AssistantMessageAdded,
    ItemPinned,
    Recorded,
    ToolResultRecorded,
    UserMessageAdded,
)
from contextledger.domain.ports import TokenCounter
from contextledger.projections.counting import CountedEvent, counted_texts
from contextledger.projections.groups import pin_reason, remove_groups, replace_entries, resize_group
from contextledger.projections.ingest import EntryBuilder
from contextledger.projections.state import Entry, Group, Removed, RenderState, WorkingContext

__all__ = ["RESTORE_KEY", "TextCounter", "restore_pinned", "unrestore"]

RESTORE_KEY = "restore"
"""``ItemPinned.meta`` key holding the pinned step group's events (``[Recorded as builtins, ...]``)."""


@runtime_checkable
class TextCounter(Protocol):
    """A counter that also counts logged contents (a blob by its address), like the renderer's cache."""

    def count_texts(self, texts: Sequence[Text]) -> list[int]:
        """Return the token counts of event contents."""
        ...


def _find(window: WorkingContext, position: int) -> tuple[int, int] | None:
    """Return (group index, entry index) of the window entry logged at ``position``, or None."""
    starts = [g.start for g in window.groups]
    index = bisect.bisect_right(starts, position) - 1
    if index < 0:
        return None
    for ei, entry in enumerate(window.groups[index].entries):
        if entry.position == position:
            return index, ei
    return None


def restore_pinned(
    state: RenderState,
    event: ItemPinned,
    counter: TokenCounter,
    builder: EntryBuilder,
) -> bool:
    """Bring the event a pin names back verbatim in ``state`` (mutated); remember how to undo it.

    Returns whether the window changed (a restore changes the prefix: the fold counts a compaction point).
    """
    position = event.position
    if position in state.restored:
        return False  # pinned again: already restored
    found = _find(state.window, position)
    if found is not None:
        gi, ei = found
        entry = state.window.groups[gi].entries[ei]
        if entry.kind in ("stub", "truncated"):
            state.restored[position] = entry
            verbatim = msgspec.structs.replace(
                entry, kind="message", text=None, tokens=entry.full_tokens, rule="", short_text=None
            )
            owner = state.window.groups[gi]
            entries = tuple(verbatim if i == ei else e for i, e in enumerate(owner.entries))
            replace_entries(state.window, gi, entries, state.pending_tokens)
            return True
        return False
    payload = event.meta.get(RESTORE_KEY)
    if not payload:
        return False
    group = _group(payload, state, counter, builder)
    if group is None or any(_find(state.window, e.position) is not None for e in group.entries):
        return False
    _insert(state.window, group)
    state.restored[position] = None
    return True


def unrestore(state: RenderState, position: int) -> bool:
    """Undo what pins restored in the group of ``position`` once none of its messages is pinned any more.

    Returns whether the window changed.
    """
    found = _find(state.window, position)
    if found is None:
        state.restored.pop(position, None)
        return False
    gi, _ = found
    group = state.window.groups[gi]
    if pin_reason(group, state) is not None:
        return False  # still pinned by another pin or rule: it stays
    before = {
        e.position: state.restored.pop(e.position) for e in group.entries if e.position in state.restored
    }
    if not before:
        return False
    if any(entry is None for entry in before.values()):
        remove_groups(state.window, [gi], "dropped", "unpinned")
        return True
    entries = tuple(before.get(e.position) or e for e in group.entries)
    replace_entries(state.window, gi, entries, state.pending_tokens)
    return True


def _group(payload: Any, state: RenderState, counter: TokenCounter, builder: EntryBuilder) -> Group | None:
    """Build the step group of the pin's payload, or None if it cannot be read or counted."""
    try:
        records = msgspec.convert(payload, list[Recorded])
    except (msgspec.ValidationError, TypeError):
        return None
    counted = _counted(records, counter)
    if counted is None or not counted:
        return None
    entries: list[Entry] = []
    for item in counted:
        event = item.event
        if isinstance(event, UserMessageAdded):
            entries.append(builder.user(item, event))
        elif isinstance(event, AssistantMessageAdded):
            entries.append(builder.assistant(item, event))
        elif isinstance(event, ToolResultRecorded):
            entries.append(builder.result(item, event, head=False))
    if not entries:
        return None
    shell = Group(start=entries[0].position, turn=state.turns, step=state.steps, entries=())
    return resize_group(shell, tuple(entries), state.pending_tokens)


def _counted(records: list[Recorded], counter: TokenCounter) -> list[CountedEvent] | None:
    texts = [counted_texts(r.event) for r in records]
    flat = [t for group in texts for t in group]
    counts: list[int]
    if isinstance(counter, TextCounter):
        counts = counter.count_texts(flat)
    elif all(isinstance(t, InlineText) for t in flat):
        counts = counter.count_many([t.text for t in flat if isinstance(t, InlineText)])
    else:
        return None  # a blob cannot be counted without the renderer's counter
    out: list[CountedEvent] = []
    at = 0
    for record, group in zip(records, texts, strict=True):
        out.append(
            CountedEvent(
                position=record.position, event=record.event, tokens=tuple(counts[at : at + len(group)])
            )
        )
        at += len(group)
    return out


def _insert(window: WorkingContext, group: Group) -> None:
    """Put ``group`` back at its place by position and take its positions out of the removed ranges."""
    starts = [g.start for g in window.groups]
    index = bisect.bisect_left(starts, group.start)
    window.groups.insert(index, group)
    window.index = {g.start: i for i, g in enumerate(window.groups)}
    window.tokens += group.tokens
    window.tool_tokens += group.tool_tokens
    positions = sorted(e.position for e in group.entries)
    window.removed = _carve(window.removed, positions[0], positions[-1])


def _carve(removed: list[Removed], first: int, last: int) -> list[Removed]:
    """Return the removed ranges without ``first..last`` (sizes split in proportion to the span)."""
    out: list[Removed] = []
    for run in removed:
        if run.last < first or run.first > last:
            out.append(run)
            continue
        span = run.last - run.first + 1
        for lo, hi in ((run.first, first - 1), (last + 1, run.last)):
            if lo <= hi:
                share = (hi - lo + 1) / span
                out.append(
                    msgspec.structs.replace(
                        run,
                        first=lo,
                        last=hi,
                        messages=round(run.messages * share),
                        tokens=round(run.tokens * share),
                    )
                )
    return out
