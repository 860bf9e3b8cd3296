"""Where a text shows in a rendered context: the text of every message searched, whatever its kind."""

from __future__ import annotations

import re

import msgspec
from contextledger.projections.call_text import argument_text
from contextledger.projections.context import RenderedContext

__all__ = ["SHOWN_AS", "Sighting", "shown_as", "sightings"]

SHOWN_AS: dict[str, str] = {
    "system": "system",
    "message": "verbatim",
    "truncated": "truncated",
    "stub": "stub",
    "summary": "summary",
    "injection": "injected",
}
"""How a text shows, by the kind of the rendered message that holds it (``system``: the system prompt)."""

_ORDER = ("system", "pinned", "verbatim", "truncated", "stub", "summary", "injected", "reasoning")


class Sighting(msgspec.Struct, frozen=True, kw_only=True):
    """One rendered message whose text holds the query: how it shows and the log positions it renders."""

    shown: str
    sources: tuple[int, ...]
    summary_id: str | None = None


def _texts(context: RenderedContext, index: int) -> tuple[str, ...]:
    message = context.messages[index]
    calls = message.tool_calls
    return (
        message.text,
        *(c.name for c in calls),
        *(c.arguments for c in calls),
        *(argument_text(c.arguments) for c in calls),
    )


def sightings(context: RenderedContext, pattern: re.Pattern[str]) -> tuple[Sighting, ...]:
    """Return every part of ``context`` (system prompt, messages' texts and tool calls) holding ``pattern``.

    Messages are searched whatever their kind — verbatim, truncated (the kept head), stubbed, a
    summary, injected content (a session-state card or any other block) — so the answer is about
    the text the model was handed, not about the event the text first came from.
    """
    pinned = {p for d in context.decisions if d.action == "pinned" for p in range(d.first, d.last + 1)}
    found: list[Sighting] = []
    if context.system and pattern.search(context.system):
        found.append(Sighting(shown="system", sources=(1,)))
    for index, message in enumerate(context.messages):
        if not any(pattern.search(text) for text in _texts(context, index) if text):
            continue
        shown = SHOWN_AS.get(message.kind, message.kind)
        if shown == "verbatim" and pinned.intersection(message.sources):
            shown = "pinned"
        summary_id = context.summary_id if message.kind == "summary" else None
        found.append(Sighting(shown=shown, sources=message.sources, summary_id=summary_id))
    return tuple(found)


def shown_as(found: tuple[Sighting, ...]) -> str | None:
    """The ways the text shows, best first (``verbatim+summary``), or None when it does not show at all."""
    ways = {s.shown for s in found}
    if not ways:
        return None
    ordered = [w for w in _ORDER if w in ways] + sorted(ways.difference(_ORDER))
    return "+".join(ordered)
