"""Where a traced text is when no message, call or result carries it, and which summaries hold it."""

from __future__ import annotations

import re
from collections.abc import Iterator

import msgspec
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.kernel.summary_log import SummaryStream
from contextledger.domain.events import ItemPinned, ItemUnpinned, SessionStarted, SummaryRecorded
from contextledger.projections.call_text import argument_text

__all__ = [
    "LISTED",
    "in_tool_definitions",
    "later_artifact",
    "only_in_summaries",
    "summary_contains",
    "textless",
]

LISTED = 12
"""How many carrying events or artifacts a verdict names (the answer's ``carried_by`` has them all)."""


def _normalized(text: str) -> str:
    return " ".join(text.casefold().split())


def textless(ledger: Ledger, session_id: str, position: int) -> str:
    """The verdict of ``--position`` on an event with no text a payload shows (a pin, an unpin)."""
    [recorded] = ledger.events(session_id, after=position - 1, upto=position)
    event = recorded.event
    kind = type(event).__name__
    if isinstance(event, ItemPinned | ItemUnpinned):
        act = "pin" if isinstance(event, ItemPinned) else "unpin"
        return (
            f"position {position} is the {act} of position {event.position} ({kind}): it has no text a model "
            f"call shows; ask about position {event.position}"
        )
    return f"position {position} is an event with no text a model call shows ({kind})"


def in_tool_definitions(ledger: Ledger, session_id: str, pattern: re.Pattern[str]) -> str | None:
    """The verdict of a text only the session's tool definitions hold (sent beside every call), or None."""
    started = next(iter(ledger.events(session_id, after=0, upto=1)), None)
    if started is None or not isinstance(started.event, SessionStarted):
        return None
    named = []
    for tool in started.event.tools:
        parameters = msgspec.json.encode(tool.parameters).decode()
        texts = (tool.name, tool.description, parameters, argument_text(parameters))
        if any(text and pattern.search(text) for text in texts):
            named.append(tool.name)
    if not named:
        return None
    return (
        f"in the tool definitions ({', '.join(named)}), logged with the session's start (position 1): sent "
        "beside the messages of every model call, never dropped"
    )


def only_in_summaries(ledger: Ledger, session_id: str, pattern: re.Pattern[str]) -> str | None:
    """The verdict of a text no event holds but a summary artifact does (a summarizer wrote it), or None.

    "Never held" would contradict ``search``, which finds it in the artifact, and the payloads that show it.
    """
    held = list(_artifacts_holding(ledger, session_id, pattern))
    if not held:
        return None
    listed = ", ".join(
        f"{a.summary_id} (positions {a.covers_from}-{a.covers_through})" for a in held[:LISTED]
    )
    more = f" and {len(held) - LISTED} more" if len(held) > LISTED else ""
    return (
        f"no event of the log holds it: only summaries written by the summarizer do: {listed}{more}; "
        "a call that shows one of them shows it"
    )


def summary_contains(ledger: Ledger, session_id: str, summary_id: str, pattern: re.Pattern[str]) -> str:
    """Whether the summary holds the text: ``exact``, ``normalized`` (case and spaces folded) or ``no``."""
    for artifact in SummaryStream(ledger.log, session_id).artifacts():
        if artifact.summary_id == summary_id:
            text = ledger.text(artifact.content)
            if pattern.search(text):
                return "exact"
            needle = _normalized(pattern.pattern.replace("\\", ""))
            return "normalized" if needle and needle in _normalized(text) else "no"
    return "no"


def _artifacts_holding(
    ledger: Ledger, session_id: str, pattern: re.Pattern[str]
) -> Iterator[SummaryRecorded]:
    """The session's summary artifacts whose text holds ``pattern``, oldest first."""
    for artifact in SummaryStream(ledger.log, session_id).artifacts():
        if pattern.search(ledger.text(artifact.content)):
            yield artifact


def later_artifact(ledger: Ledger, session_id: str, pattern: re.Pattern[str], after: int) -> str | None:
    """A summary produced after ``after`` that holds the text (none of the calls traced applied it)."""
    return next(
        (a.summary_id for a in _artifacts_holding(ledger, session_id, pattern) if a.produced_at > after), None
    )
