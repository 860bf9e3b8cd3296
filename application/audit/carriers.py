"""The events that carry a traced text: where it entered, whether a payload sends it, how it may show."""

from __future__ import annotations

import re

import msgspec
from contextledger.application.audit.traced_calls import in_signed_reasoning
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.search.log_search import searchable_texts
from contextledger.application.search.text_index import TextIndex
from contextledger.domain.events import (
    AnyEvent,
    AssistantMessageAdded,
    SessionStarted,
    ToolResultRecorded,
    UserMessageAdded,
)
from contextledger.projections.call_text import argument_text
from contextledger.projections.card_state import would_quote

__all__ = ["Carrier", "carriers_of"]


class Carrier(msgspec.Struct, frozen=True):
    """An event holding the traced text: its position, kind, a snippet, and how a payload may show it."""

    position: int
    kind: str
    snippet: str
    text: str
    tool_name: str | None
    sent: bool = True
    """Whether the text is in a part of the event a payload sends (not its reasoning)."""
    quotable: bool = False
    """Whether the session-state card may quote the event once it leaves the window (``would_quote``)."""
    signed: bool = False
    """Whether the text is only in the event's signed reasoning (``in_signed_reasoning``)."""


def _sent(ledger: Ledger, event: AnyEvent, pattern: re.Pattern[str]) -> bool:
    """Whether ``pattern`` is in a part of ``event`` a payload sends: text, tool-call names and arguments."""
    if isinstance(event, SessionStarted):
        texts = [event.system_prompt]
    elif isinstance(event, AssistantMessageAdded):
        texts = [ledger.text(event.content), *(c.name for c in event.tool_calls)]
        # the arguments as sent (JSON) and their values as the model reads them (ADR 0086)
        texts += [
            text for c in event.tool_calls for text in (c.arguments, argument_text(c.arguments)) if text
        ]
    elif isinstance(event, UserMessageAdded | ToolResultRecorded):
        texts = [ledger.text(event.content)]
    else:
        return False
    return any(pattern.search(text) for text in texts)


def carriers_of(
    ledger: Ledger,
    session_id: str,
    query: str,
    pattern: re.Pattern[str],
    position: int | None,
    *,
    regex: bool,
) -> list[Carrier]:
    """Every event holding ``pattern`` (or just the event at ``position``), in log order."""
    events = (
        ledger.events(session_id, after=position - 1, upto=position)
        if position is not None
        else TextIndex(ledger).scan(session_id, query, regex=regex)
    )
    found: list[Carrier] = []
    for recorded in events:
        for text, tool in searchable_texts(ledger, recorded.event):
            match = pattern.search(text)
            if match or position is not None:
                start, end = match.span() if match else (0, min(len(text), 80))
                snippet = " ".join(text[max(0, start - 60) : end + 60].split())
                event = recorded.event
                sent = _sent(ledger, event, pattern)
                content = getattr(event, "content", None)
                quotable = would_quote(event, ledger.text(content) if content is not None else "")
                kind = type(event).__name__
                signed = not sent and in_signed_reasoning(event, pattern)
                found.append(Carrier(recorded.position, kind, snippet, text, tool, sent, quotable, signed))
                break
    return found
