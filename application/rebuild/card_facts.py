"""The card's facts of each message, kept per session: a rebuild under another policy does not look again.

The session-state card's decisions, plans and user extractions are found by scanning every message's
whole text (``card_state.assistant_facts``, ``user_facts``), about a quarter of a rebuild after a
config change. They depend on the text alone, never on the policy, so the context view keeps them as
rows beside the token rows: one row per session, keyed by the session id (so forgetting the session
erases it with its other rows), holding the facts of every message that has any, by position. The
row's position is the last position looked at: every event up to it was, so a position up to it
without an entry has none. Like every derived row it is rebuilt from the log when it is missing or
unreadable, and its name changes with ``CARD_FACTS_FORMAT``.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
from contextledger.application.views.view_runner import Rows
from contextledger.domain.events import AssistantMessageAdded, UserMessageAdded
from contextledger.domain.ports import ProjectionRows
from contextledger.projections.card_state import CARD_FACTS_FORMAT, NO_FACTS, TextFacts, message_facts
from contextledger.projections.counting import CountedEvent

__all__ = ["CARD_FACTS", "BatchFacts", "CardFacts"]

CARD_FACTS = f"card-facts/v{CARD_FACTS_FORMAT}"
"""The name of the rows (shared by every context version: the facts do not depend on the policy)."""

_DECODE = msgspec.msgpack.Decoder(dict[int, TextFacts]).decode
_ENCODE = msgspec.msgpack.Encoder().encode


_MESSAGES = (AssistantMessageAdded, UserMessageAdded)


class _Session:
    """One session's kept facts during a batch: the last position looked at, the facts by position."""

    __slots__ = ("changed", "facts", "upto")

    def __init__(self, upto: int, facts: dict[int, TextFacts]) -> None:
        self.upto = upto
        self.facts = facts
        self.changed = False


class BatchFacts:
    """The kept facts of the sessions of one batch: looked up, or found and added when missing."""

    def __init__(self, sessions: dict[str, _Session]) -> None:
        """Start from the rows read for the batch's sessions."""
        self._sessions = sessions

    def attach(self, session_id: str, counted: CountedEvent) -> CountedEvent:
        """Return ``counted`` with its card facts (kept ones, else found now); other events unchanged.

        Events must come in each session's order. A session's row grows only over contiguous
        positions, so that "looked at up to" stays true.
        """
        position = counted.position
        kept = self._sessions.get(session_id)
        if kept is not None and position <= kept.upto:
            if counted.card is not None or not isinstance(counted.event, _MESSAGES):
                return counted
            return msgspec.structs.replace(counted, card=kept.facts.get(position, NO_FACTS))
        facts = message_facts(counted.event, counted.full_text)
        if kept is None:
            kept = self._sessions[session_id] = _Session(0, {})
        if position == kept.upto + 1:
            kept.upto = position
            kept.changed = True
            if facts is not None and facts is not NO_FACTS:
                kept.facts[position] = facts
        return counted if facts is None else msgspec.structs.replace(counted, card=facts)

    def rows(self) -> Rows:
        """The rows of the sessions whose facts grew (whole rows: they replace the stored ones)."""
        return {
            session_id: (kept.upto, _ENCODE(dict(sorted(kept.facts.items()))))
            for session_id, kept in self._sessions.items()
            if kept.changed
        }


class CardFacts:
    """Reads the card facts rows of the sessions a batch touches (one read per batch)."""

    def __init__(self, store: ProjectionRows) -> None:
        """Keep the rows in ``store`` under ``CARD_FACTS``."""
        self.store = store
        self.name = CARD_FACTS

    def batch(self, sessions: Sequence[str]) -> BatchFacts:
        """The kept facts of ``sessions``; an unreadable row counts as none (its facts are found again)."""
        found = self.store.load_rows(self.name, sessions) if sessions else {}
        kept: dict[str, _Session] = {}
        for session_id, (upto, data) in found.items():
            try:
                kept[session_id] = _Session(upto, _DECODE(data))
            except msgspec.DecodeError:
                continue
        return BatchFacts(kept)
