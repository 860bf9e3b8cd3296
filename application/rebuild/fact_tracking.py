"""Following facts through a simulation: where each entered the log, and the calls whose context lacks it."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.search.log_search import searchable_texts
from contextledger.projections.call_text import argument_text
from contextledger.projections.context import RenderedContext

__all__ = ["FactFate", "FactTracker", "entered_at"]


class FactFate(msgspec.Struct, frozen=True, kw_only=True):
    """Whether a fact (``--fact``) stayed in the context of one session under one policy.

    ``left_calls`` counts the calls where the fact was in the log but not in the rendered context;
    ``first_left_position`` numbers the first such call as ``why`` does (``SimulatedCall.position``);
    ``rule`` is the rule that removed the position it entered at, in that call.
    """

    fact: str
    policy: str
    session_id: str
    entered_at: int | None
    left_calls: int = 0
    first_left_position: int | None = None
    rule: str | None = None


def _normalized(text: str) -> str:
    return " ".join(text.casefold().split())


def entered_at(source: Ledger, session_id: str, facts: Sequence[str]) -> dict[str, int]:
    """Return the first position whose text holds each fact (facts never logged are absent)."""
    wanted = {fact: _normalized(fact) for fact in facts}
    found: dict[str, int] = {}
    for recorded in source.events(session_id):
        if len(found) == len(wanted):
            break
        texts = [_normalized(text) for text, _ in searchable_texts(source, recorded.event)]
        for fact, needle in wanted.items():
            if fact not in found and any(needle in text for text in texts):
                found[fact] = recorded.position
    return found


def _context_parts(context: RenderedContext) -> list[str]:
    """The context's texts as the model reads them: a call's arguments as sent, and their values unescaped.

    ``entered_at`` finds a fact in an event's searchable texts, which hold a call's argument values
    unescaped (``argument_text``): the context is searched alike, so a fact with a quote or a line break
    in a call's arguments is found where it is sent (it was reported gone from the call that sent it).
    """
    parts = [context.system]
    for message in context.messages:
        parts.append(message.text)
        for call in message.tool_calls:
            parts.append(f"{call.name}({call.arguments})")
            unescaped = argument_text(call.arguments)
            if unescaped:
                parts.append(unescaped)
    return parts


def _context_text(context: RenderedContext) -> str:
    """The context's texts as the facts are looked for in them (normalized, one string)."""
    return _normalized("\n".join(_context_parts(context)))


class _NormalizedParts:
    """``_context_text`` of consecutive contexts, normalizing each part once while it stays shown.

    Normalizing splits on whitespace, and the parts are joined by a newline, so no word spans two
    parts: the normalized whole is the non-empty normalized parts joined by a space.
    """

    def __init__(self) -> None:
        self._known: dict[str, str] = {}

    def text(self, context: RenderedContext) -> str:
        """Return ``_context_text(context)``."""
        known = self._known
        now: dict[str, str] = {}
        words: list[str] = []
        for part in _context_parts(context):
            normal = known.get(part)
            if normal is None:
                normal = _normalized(part)
            now[part] = normal
            if normal:
                words.append(normal)
        self._known = now
        return " ".join(words)


class FactTracker:
    """Follows each fact of one session under one policy, call by call."""

    def __init__(self, policy: str, session_id: str, entered: dict[str, int], facts: Sequence[str]) -> None:
        self.policy = policy
        self.session_id = session_id
        self.entered = entered
        self.facts = facts
        self.left: dict[str, int] = dict.fromkeys(facts, 0)
        self.first: dict[str, tuple[int, str | None]] = {}
        self._texts = _NormalizedParts()
        self._needles = {fact: _normalized(fact) for fact in facts}

    def see(self, position: int, context: RenderedContext, evicted: dict[int, str]) -> None:
        """Follow the facts through the call that shows the log up to ``position``."""
        logged = [f for f in self.facts if self.entered.get(f, position + 1) <= position]
        if not logged:
            return
        text = self._texts.text(context)
        for fact in logged:
            if self._needles[fact] not in text:
                self.left[fact] += 1
                self.first.setdefault(fact, (position, evicted.get(self.entered[fact])))

    def fates(self) -> list[FactFate]:
        """Return each fact's fate in this session under this policy."""
        return [
            FactFate(
                fact=fact,
                policy=self.policy,
                session_id=self.session_id,
                entered_at=self.entered.get(fact),
                left_calls=self.left[fact],
                first_left_position=self.first[fact][0] if fact in self.first else None,
                rule=self.first[fact][1] if fact in self.first else None,
            )
            for fact in self.facts
        ]
