"""Rows describing a session's stored events, for ``demo`` and ``show``."""

from __future__ import annotations

from typing import Any

from contextledger.application.ledger import Ledger
from contextledger.domain.content import BlobText, Text, text_chars, text_preview
from contextledger.domain.events import (
    AssistantMessageAdded,
    ItemPinned,
    ItemUnpinned,
    SessionStarted,
    ToolResultRecorded,
    UserMessageAdded,
)
from rich.console import Console
from rich.table import Table

__all__ = ["history_rows", "print_history"]

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


def history_rows(ledger: Ledger, session_id: str) -> list[dict[str, Any]]:
    """Return one dict per stored event: position, event type, role, preview, tools, storage."""
    rows: list[dict[str, Any]] = []
    for recorded in ledger.events(session_id):
        event = recorded.event
        row: dict[str, Any] = {
            "position": recorded.seq,
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


def print_history(console: Console, rows: list[dict[str, Any]]) -> None:
    """Print the rows of ``history_rows`` as a table: position, event, role, content, tools, storage."""
    table = Table("pos", "event", "role", "content", "tools", "stored")
    for row in rows:
        table.add_row(
            str(row["position"]), row["event"], row["role"], row["preview"], row["tools"], row["stored"]
        )
    console.print(table)
