"""Search a session's log, summaries included: what was evicted is still there to be found."""

from __future__ import annotations

import re
from collections.abc import Iterator

import msgspec
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.kernel.summary_log import SummaryStream
from contextledger.domain.errors import ValidationError
from contextledger.domain.events import (
    AnyEvent,
    AssistantMessageAdded,
    SessionStarted,
    ToolResultRecorded,
    UserMessageAdded,
)
from contextledger.projections.call_text import argument_text

__all__ = ["SearchHit", "query_pattern", "search_session", "searchable_texts"]


def query_pattern(query: str, *, regex: bool) -> re.Pattern[str]:
    """The pattern ``search`` and ``why`` look for: ``query``, case-insensitive, or a regular expression.

    A single space in a plain ``query`` matches any run of whitespace: snippets show a line break and
    its indent as one space, and a snippet pasted back read "not in the log" of a text the log holds.
    Two spaces or more are matched as they are (a line's own indentation).

    Raises:
        ValidationError: not a regular expression.
    """
    parts = re.split(r"( +)", query)
    source = query if regex else "".join(r"\s+" if p == " " else re.escape(p) for p in parts)
    try:
        return re.compile(source, re.IGNORECASE)
    except re.error as error:
        raise ValidationError(f"not a regular expression: {query!r} ({error})") from None


SNIPPET_CHARS = 80
"""Characters shown on each side of a match."""


class SearchHit(msgspec.Struct, frozen=True, kw_only=True):
    """A match: where (log position, or a summary id), what kind of event, and the text around it."""

    position: int
    kind: str
    snippet: str
    summary_id: str | None = None
    tool_name: str | None = None


def searchable_texts(ledger: Ledger, event: AnyEvent) -> Iterator[tuple[str, str | None]]:
    """Yield the searchable texts of an event, each with the tool it belongs to (if any)."""
    if isinstance(event, SessionStarted):
        yield event.system_prompt, None
    elif isinstance(event, UserMessageAdded):
        yield ledger.text(event.content), None
    elif isinstance(event, AssistantMessageAdded):
        yield ledger.text(event.content), None
        if event.reasoning:
            yield event.reasoning, None
        for call in event.tool_calls:
            yield f"{call.name}({call.arguments})", call.name
            decoded = argument_text(call.arguments)
            if decoded:
                yield decoded, call.name
    elif isinstance(event, ToolResultRecorded):
        yield ledger.text(event.content), event.tool_name


def _snippet(text: str, start: int, end: int) -> str:
    left = max(0, start - SNIPPET_CHARS)
    right = min(len(text), end + SNIPPET_CHARS)
    body = " ".join(text[left:right].split())
    return ("…" if left else "") + body + ("…" if right < len(text) else "")


def search_session(
    ledger: Ledger, session_id: str, query: str, *, regex: bool = False, limit: int = 50
) -> list[SearchHit]:
    """Return up to ``limit`` matches of ``query`` (text, case-insensitive; or a regular expression).

    Every event of the log is searched, whatever any render kept, and every summary artifact.
    """
    pattern = query_pattern(query, regex=regex)
    hits: list[SearchHit] = []
    for recorded in ledger.events(session_id):
        kind = type(recorded.event).__name__
        for text, tool in searchable_texts(ledger, recorded.event):
            match = pattern.search(text)
            if match:
                hits.append(
                    SearchHit(
                        position=recorded.position,
                        kind=kind,
                        snippet=_snippet(text, *match.span()),
                        tool_name=tool,
                    )
                )
                break
        if len(hits) >= limit:
            return hits
    for summary in SummaryStream(ledger.log, session_id).artifacts():
        text = ledger.text(summary.content)
        match = pattern.search(text)
        if match and len(hits) < limit:
            hits.append(
                SearchHit(
                    position=summary.produced_at,
                    kind=type(summary).__name__,
                    snippet=_snippet(text, *match.span()),
                    summary_id=summary.summary_id,
                )
            )
    return hits
