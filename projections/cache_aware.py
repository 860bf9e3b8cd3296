"""Cache-aware compaction: compact when the provider's prompt cache has expired anyway (event timestamps)."""

from __future__ import annotations

from contextledger.domain.events import (
    AnyEvent,
    AssistantMessageAdded,
    SessionStarted,
    ToolResultRecorded,
    UserMessageAdded,
)
from contextledger.projections.budget import Budget
from contextledger.projections.state import RenderState

__all__ = ["cache_expired"]

_TIMED = (SessionStarted, UserMessageAdded, AssistantMessageAdded, ToolResultRecorded)
"""Events whose ``at`` is when the conversation happened (summaries and pins are stamped by tools)."""


def cache_expired(budget: Budget, state: RenderState, event: AnyEvent) -> bool:
    """Return whether ``event`` is a cache-aware compaction point; advance ``state.last_at``.

    With ``budget.compact_on_cache_expiry`` set, the fold keeps the latest conversation timestamp
    seen (``state.last_at``, a running maximum, so events stamped out of order never open a gap).
    An event more than the TTL after it arrives after the provider's prompt cache has expired: the
    next call rewrites its whole prefix anyway, so compacting now (down to the low-water mark,
    when the context is above it) costs no cached prefix. Pure in the log: the timestamps are the
    events' own ``at`` fields. Without the option the state is left untouched.

    Args:
        budget: The budget, carrying the option.
        state: The fold's state, which the caller owns (``last_at`` is updated in place).
        event: The event being folded.

    Returns:
        True when the fold should compact now.
    """
    ttl = budget.cache_expiry_seconds
    if ttl is None or not isinstance(event, _TIMED) or event.at is None:
        return False
    now = event.at.timestamp()
    last = state.last_at
    if last is not None and now <= last:
        return False
    state.last_at = now
    return last is not None and now - last > ttl and state.total > budget.low_mark
