"""Recall for the agent: a tool the model calls to search and expand evicted content, from the log."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from contextledger.application.kernel.ledger import Ledger
from contextledger.application.search.log_search import SNIPPET_CHARS, searchable_texts
from contextledger.application.search.text_index import TextIndex
from contextledger.domain.errors import ContextLedgerError
from contextledger.domain.events import AssistantMessageAdded, ToolResultRecorded, UserMessageAdded

__all__ = ["RECALL_DESCRIPTION", "RecallTool", "recall_tool"]

RECALL_DESCRIPTION = (
    "Look up earlier content of this conversation that is no longer shown in full: tool results that "
    "were stubbed (e.g. '[result expired: read_file call_7, 4,812 tokens; restore: seq 1234]'), "
    "truncated, summarized or dropped. Give `position` (the seq a stub names) to read that event in "
    "full (use `offset` to page through a long one), `from` and `through` (a span the session-state "
    "card lists as not shown) to list that span's events, or `query` to search the whole history for a text."
)

_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "Text to search for (case-insensitive)."},
        "regex": {"type": "boolean", "description": "Treat `query` as a regular expression."},
        "position": {"type": "integer", "minimum": 1, "description": "The seq of the event to expand."},
        "offset": {"type": "integer", "minimum": 0, "description": "Character offset to read from."},
        "from": {"type": "integer", "minimum": 1, "description": "First seq of a span to list."},
        "through": {"type": "integer", "minimum": 1, "description": "Last seq of a span to list."},
    },
    "additionalProperties": False,
}


class RecallTool:
    """The ``recall`` tool of one session: schemas for OpenAI and Anthropic, and ``handle``.

    ``handle`` never raises for a bad call: the model gets an explanation it can act on.

    Args:
        ledger: The ledger holding the session.
        session_id: The session the agent works in (a fork sees its parent's prefix too).
        name: The tool's name as the model sees it.
        max_chars: The most characters one answer carries (longer texts are paged with ``offset``).
        limit: The most search hits one answer lists.
    """

    def __init__(
        self,
        ledger: Ledger,
        session_id: str,
        *,
        name: str = "recall",
        max_chars: int = 6_000,
        limit: int = 10,
    ) -> None:
        """Bind the tool to a session."""
        self.ledger = ledger
        self.session_id = session_id
        self.name = name
        self.max_chars = max_chars
        self.limit = limit

    @property
    def openai_schema(self) -> dict[str, Any]:
        """The tool in the OpenAI Chat Completions shape (``tools=[...]``)."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": RECALL_DESCRIPTION, "parameters": _PARAMETERS},
        }

    @property
    def anthropic_schema(self) -> dict[str, Any]:
        """The tool in the Anthropic Messages shape (``tools=[...]``)."""
        return {"name": self.name, "description": RECALL_DESCRIPTION, "input_schema": _PARAMETERS}

    @property
    def schema(self) -> dict[str, dict[str, Any]]:
        """Both shapes: ``{"openai": ..., "anthropic": ...}``."""
        return {"openai": self.openai_schema, "anthropic": self.anthropic_schema}

    def handle(self, arguments: str | Mapping[str, Any]) -> str:
        """Answer a call of the tool (arguments as the JSON text OpenAI sends, or Anthropic's object)."""
        try:
            args = json.loads(arguments) if isinstance(arguments, str) else dict(arguments)
        except json.JSONDecodeError as error:
            return f"error: the arguments are not JSON ({error.msg})"
        if not isinstance(args, dict):
            return "error: the arguments must be an object with `query` or `position`"
        try:
            return self._answer(args)
        except ContextLedgerError as error:
            return f"error: {error}"

    def _answer(self, args: dict[str, Any]) -> str:
        position, offset, query = args.get("position"), args.get("offset", 0), args.get("query")
        if position is not None:
            if not isinstance(position, int) or not isinstance(offset, int) or offset < 0:
                return "error: `position` and `offset` must be non-negative integers"
            return self.expand(position, offset)
        first, last = args.get("from"), args.get("through")
        if first is not None or last is not None:
            if not isinstance(first, int) or not isinstance(last, int) or not 1 <= first <= last:
                return "error: `from` and `through` must be positions with from <= through"
            return self.span(first, last)
        if isinstance(query, str) and query.strip():
            return self.search(query, regex=bool(args.get("regex", False)))
        return "error: give `position` (the seq a stub names), `from` and `through`, or a non-empty `query`"

    def span(self, first: int, last: int) -> str:
        """Return one line per event of positions ``first..last``: its kind and the start of its text."""
        head = self.ledger.version(self.session_id)
        if first > head:
            return f"error: position {first} is outside this session (1..{head})"
        lines = [f"[seq {first}..{min(last, head)}: {min(last, head) - first + 1} events]"]
        size = len(lines[0])
        for recorded in self.ledger.events(self.session_id, after=first - 1, upto=min(last, head)):
            event = recorded.event
            texts = list(searchable_texts(self.ledger, event))
            tool = next((t for _, t in texts if t), "")
            body = " ".join(" ".join(t for t, _ in texts).split())[:160]
            line = f"- seq {recorded.position} ({type(event).__name__}{' ' + tool if tool else ''}): {body}"
            if size + len(line) + 1 > self.max_chars - 80:
                lines.append(f'[more: call again with {{"from": {recorded.position}, "through": {last}}}]')
                break
            lines.append(line)
            size += len(line) + 1
        lines.append('Expand one with {"position": <seq>}.')
        return "\n".join(lines)

    def expand(self, position: int, offset: int = 0) -> str:
        """Return the event at ``position`` in full (from ``offset``, at most ``max_chars``)."""
        head = self.ledger.version(self.session_id)
        if not 1 <= position <= head:
            return f"error: position {position} is outside this session (1..{head})"
        [recorded] = self.ledger.events(self.session_id, after=position - 1, upto=position)
        event = recorded.event
        if isinstance(event, ToolResultRecorded):
            label = f"tool result of {event.tool_name} {event.call_id}" + (
                " (error)" if event.is_error else ""
            )
        elif isinstance(event, AssistantMessageAdded):
            label = "assistant message"
        elif isinstance(event, UserMessageAdded):
            label = "user message"
        else:
            label = type(event).__name__
        text = "\n".join(t for t, _ in searchable_texts(self.ledger, event))
        page = text[offset : offset + self.max_chars]
        header = f"[seq {position}: {label}, {len(text):,} characters"
        rest = len(text) - offset - len(page)
        if offset or rest > 0:
            header += f"; showing {offset:,}..{offset + len(page):,}"
        header += "]"
        footer = (
            f"\n[{rest:,} more characters: call again with offset {offset + len(page)}]" if rest > 0 else ""
        )
        return f"{header}\n{page}{footer}"

    def search(self, query: str, *, regex: bool = False) -> str:
        """Return the matches of ``query`` in the session's log and summaries, one line each.

        The log is read through the search projection (``TextIndex``): only chunks holding the
        query's words are read, so a search stays fast on long sessions.
        """
        try:
            pattern = re.compile(query if regex else re.escape(query), re.IGNORECASE)
        except re.error as error:
            return f"error: not a regular expression: {query!r} ({error})"
        lines: list[str] = []
        for recorded in TextIndex(self.ledger).scan(self.session_id, query, regex=regex):
            for text, tool in searchable_texts(self.ledger, recorded.event):
                match = pattern.search(text)
                if match:
                    kind = type(recorded.event).__name__ + (f" {tool}" if tool else "")
                    lines.append(f"- seq {recorded.position} ({kind}): {_snippet(text, *match.span())}")
                    break
            if len(lines) >= self.limit:
                break
        for summary in self.ledger.summaries(self.session_id):
            text = self.ledger.text(summary.content)
            match = pattern.search(text)
            if match and len(lines) < self.limit:
                span = f"covers seq {summary.covers_from}..{summary.covers_through}"
                lines.append(f"- summary {summary.summary_id} ({span}): {_snippet(text, *match.span())}")
        if not lines:
            return f"no match for {query!r} in this session's history"
        head = f"{len(lines)} match{'es' if len(lines) != 1 else ''} for {query!r}:"
        return "\n".join([head, *lines, 'Expand one with {"position": <seq>}.'])[: self.max_chars]


def _snippet(text: str, start: int, end: int) -> str:
    left, right = max(0, start - SNIPPET_CHARS), min(len(text), end + SNIPPET_CHARS)
    body = " ".join(text[left:right].split())
    return ("…" if left else "") + body + ("…" if right < len(text) else "")


def recall_tool(ledger: Ledger, session_id: str, **options: Any) -> RecallTool:
    """Return the ``recall`` tool of a session (``tool.schema``, ``tool.handle(arguments) -> str``)."""
    ledger.version(session_id)  # the session must exist
    return RecallTool(ledger, session_id, **options)
