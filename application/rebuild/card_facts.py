"""The card's facts of each message, kept per session: a rebuild under another policy does not look again.

The session-state card's decisions, plans and user extractions are found by scanning every message's
whole text (``card_state.assistant_facts``, ``user_facts``), about a quarter of a rebuild after a
config change. They depend on the text alone, never on the policy, so the context view keeps them as
rows beside the token rows, per session and block of ``BLOCK`` positions: keyed ``<session>/<block>``
(so forgetting the session erases them with its other rows), each holding the facts of the block's
messages that have any, by position. A row's position is the last position looked at: every
position of the block up to it was, so one without an entry has none. A row is bounded (a live tail
rewrites only the block it extends). Like every derived row it is rebuilt from the log when it is
missing or unreadable, and its name changes with ``CARD_FACTS_FORMAT``.
"""

from __future__ import annotations

import bisect
import operator
from collections.abc import Mapping

import msgspec
from contextledger.application.views.view_runner import Rows
from contextledger.domain.events import AssistantMessageAdded, UserMessageAdded
from contextledger.domain.ports import ProjectionRows
from contextledger.projections.card_state import CARD_FACTS_FORMAT, NO_FACTS, MessageFacts, message_facts
from contextledger.projections.counting import CountedEvent

__all__ = ["BLOCK", "CARD_FACTS", "BatchFacts", "CardFacts", "facts_key"]

CARD_FACTS = f"card-facts/v{CARD_FACTS_FORMAT}"
"""The name of the rows (shared by every context version: the facts do not depend on the policy)."""
BLOCK = 1_024
"""Session positions per row."""

_DECODE = msgspec.msgpack.Decoder(dict[int, MessageFacts]).decode
_ENCODE = msgspec.msgpack.Encoder().encode
_MESSAGES = (AssistantMessageAdded, UserMessageAdded)
_POSITION = operator.attrgetter("position")


def facts_key(session_id: str, position: int) -> str:
    """The key of the row holding the facts of a session position."""
    return f"{session_id}/{position // BLOCK}"


class _Kept:
    """One row during a batch: the last position looked at, the facts by position, whether it grew."""

    __slots__ = ("changed", "facts", "upto")

    def __init__(self, upto: int, facts: dict[int, MessageFacts]) -> None:
        self.upto = upto
        self.facts = facts
        self.changed = False


class BatchFacts:
    """The kept facts of the sessions of one batch: looked up, or found and added when missing."""

    def __init__(self, kept: dict[str, _Kept]) -> None:
        """Start from the rows read for the batch."""
        self._kept = kept

    def attach(self, session_id: str, events: list[CountedEvent]) -> None:
        """Give a session's events of the batch their card facts (kept ones, else found now), in place.

        The events must be the batch's own, made for this fold and not yet seen by anything else: their
        ``card`` is set on them (``force_setattr``; a copy per message, then a new list, cost more). The
        events must come in the session's order. Per block the events cross, its row is looked up once:
        the events up to the position it looked at get its facts (an event already carrying facts keeps
        them, and other kinds get none), the others are looked at now and get what is found. A row grows
        only over contiguous positions from its block's first, so that "looked at up to" stays true.
        """
        set_card = msgspec.structs.force_setattr
        start = 0
        while start < len(events):
            block = events[start].position // BLOCK
            end = bisect.bisect_left(events, (block + 1) * BLOCK, lo=start, key=_POSITION)
            key = facts_key(session_id, events[start].position)
            kept = self._kept.get(key)
            looked = (
                start if kept is None else bisect.bisect_right(events, kept.upto, start, end, key=_POSITION)
            )
            if kept is not None:
                facts = kept.facts
                for c in events[start:looked]:
                    if c.card is None and isinstance(c.event, _MESSAGES):
                        set_card(c, "card", facts.get(c.position, NO_FACTS))
            for counted in events[looked:end]:
                found = message_facts(counted.event, counted.full_text)
                if kept is None:
                    kept = self._kept[key] = _Kept(max(block * BLOCK, 1) - 1, {})
                if counted.position == kept.upto + 1:
                    kept.upto = counted.position
                    kept.changed = True
                    if found is not None and found is not NO_FACTS:
                        kept.facts[counted.position] = found
                if found is not None:
                    set_card(counted, "card", found)
            start = end

    def rows(self) -> Rows:
        """The rows that grew (whole rows: they replace the stored ones)."""
        return {
            key: (kept.upto, _ENCODE(dict(sorted(kept.facts.items()))))
            for key, kept in self._kept.items()
            if kept.changed
        }


class CardFacts:
    """Reads the card facts rows a batch needs (one read per batch)."""

    def __init__(self, store: ProjectionRows) -> None:
        """Keep the rows in ``store`` under ``CARD_FACTS``."""
        self.store = store
        self.name = CARD_FACTS

    def keys(self, spans: Mapping[str, tuple[int, int]]) -> list[str]:
        """The keys of the rows of sessions' positions, each from its first to its last (blocks between)."""
        return [
            facts_key(session_id, block * BLOCK)
            for session_id, (first, last) in spans.items()
            for block in range(first // BLOCK, last // BLOCK + 1)
        ]

    def read(self, keys: list[str]) -> Rows:
        """The stored rows of ``keys`` (one read; on any thread, for ``batch``'s ``ahead``)."""
        return self.store.load_rows(self.name, keys) if keys else {}

    def batch(
        self, events: Mapping[str, list[CountedEvent]], ahead: tuple[frozenset[str], Rows] | None = None
    ) -> BatchFacts:
        """The kept facts of a batch's events by session (each in order); an unreadable row counts as none.

        ``ahead``: keys and the rows ``read`` found of them, read earlier; taken when they hold every key
        the batch needs (no row of them may have been written since), else the rows are read now.
        """
        keys = self.keys({s: (counted[0].position, counted[-1].position) for s, counted in events.items()})
        if ahead is not None and ahead[0].issuperset(keys):
            rows = ahead[1]
            found = {key: rows[key] for key in keys if key in rows}
        else:
            found = self.read(keys)
        kept: dict[str, _Kept] = {}
        for key, (upto, data) in found.items():
            try:
                kept[key] = _Kept(upto, _DECODE(data))
            except msgspec.DecodeError:
                continue
        return BatchFacts(kept)
