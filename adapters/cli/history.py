"""The table of a session's stored events, for ``demo`` and ``show``; every cell is data, never markup."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from contextledger.adapters.cli.common import cell
from contextledger.domain.content import BlobText, Text, text_chars, text_preview
from contextledger.domain.events import (
    AssistantMessageAdded,
    ItemPinned,
    ItemUnpinned,
    Recorded,
    SessionStarted,
    SummaryRecorded,
    ToolResultRecorded,
    UserMessageAdded,
)

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["event_documents", "history_rows", "print_history", "print_summaries"]

_PREVIEW = 70


def _stored(text: Text | None) -> str:
    if text is None:
        return "-"
    if isinstance(text, BlobText):
        return f"blob {text.sha256[:10]} ({text.chars:,} chars)"
    return f"inline ({text_chars(text):,} chars)"


def _preview(text: Text | None) -> str:
    if text is None:
        return ""
    flat = " ".join(text_preview(text, _PREVIEW * 2).split())
    return flat if len(flat) <= _PREVIEW else flat[: _PREVIEW - 1] + "…"


def event_documents(events: Sequence[Recorded]) -> list[dict[str, Any]]:
    """Return one ``{"position", "event"}`` document per stored event (the ``--json`` output of a history)."""
    return [{"position": recorded.position, "event": recorded.event} for recorded in events]


def history_rows(events: Sequence[Recorded]) -> list[dict[str, Any]]:
    """Return one dict per stored event: position, event type, role, preview, tools, storage."""
    rows: list[dict[str, Any]] = []
    for recorded in events:
        event = recorded.event
        row: dict[str, Any] = {
            "position": recorded.position,
            "event": type(event).__name__,
            "role": "",
            "preview": "",
            "tools": "",
            "stored": "",
        }
        if isinstance(event, SessionStarted):
            row |= {
                "role": "system",
                "preview": " ".join(event.system_prompt.split())[:_PREVIEW],
                "tools": ", ".join(t.name for t in event.tools),
                "stored": f"model {event.model or '?'}",
            }
        elif isinstance(event, UserMessageAdded):
            row |= {"role": "user", "preview": _preview(event.content), "stored": _stored(event.content)}
        elif isinstance(event, AssistantMessageAdded):
            row |= {
                "role": "assistant",
                "preview": _preview(event.content),
                "tools": ", ".join(f"{c.name}#{c.id}" for c in event.tool_calls),
                "stored": _stored(event.content),
            }
        elif isinstance(event, ToolResultRecorded):
            row |= {
                "role": "tool",
                "preview": ("ERROR " if event.is_error else "") + _preview(event.content),
                "tools": f"{event.tool_name}#{event.call_id}",
                "stored": _stored(event.content),
            }
        elif isinstance(event, ItemPinned | ItemUnpinned):
            row |= {"preview": f"position {event.position}"}
        rows.append(row)
    return rows


def print_history(console: Console, events: Sequence[Recorded]) -> None:
    """Print the events as a table: position, event, role, content, tools, storage."""
    from rich.table import Table  # noqa: PLC0415 - rich loads only when a command prints

    columns = ("position", "event", "role", "preview", "tools", "stored")
    table = Table("pos", "event", "role", "content", "tools", "stored")
    for row in history_rows(events):
        table.add_row(*(cell(row[name]) for name in columns))
    console.print(table)


def print_summaries(console: Console, summaries: Sequence[tuple[SummaryRecorded, str]]) -> None:
    """Print each summary artifact: what it covers, from which position it applies, and its text."""
    if not summaries:
        console.print("no summaries")
        return
    from rich.table import Table  # noqa: PLC0415 - rich loads only when a command prints

    table = Table("summary", "covers", "applies from", "round", "producer", "text", title="summaries")
    for summary, text in summaries:
        table.add_row(
            *map(
                cell,
                (
                    summary.summary_id,
                    f"{summary.covers_from}-{summary.covers_through}",
                    summary.produced_at,
                    summary.round,
                    summary.producer or "",
                    text,
                ),
            )
        )
    console.print(table)
