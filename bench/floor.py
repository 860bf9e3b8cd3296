"""Render floors: the I/O, decoding and encoding a render cannot avoid, with sqlite3 and msgspec only.

The floor of a render from a snapshot reads, from the same SQLite file, the latest render snapshot
of the session and the events after it, decodes them with msgspec (the snapshot's entries with a
minimal schema of the fields a payload needs, the events untyped), takes the messages
the rendered context shows from them (reading blob texts), builds the OpenAI messages and encodes
the request body. It makes no policy decision and counts no token, so a render can approach it but
not go below it. Nothing here imports contextledger; the table layout and the snapshot's entry
fields are the SQLite store's and the render state's.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import msgspec

__all__ = ["WarmFloor", "cold_render_floor"]

_DECODE = msgspec.msgpack.Decoder()
_ENCODE = msgspec.json.Encoder()
_PARAMS = 500


def _text(conn: sqlite3.Connection, content: dict[str, Any] | None) -> str:
    if not content:
        return ""
    if content.get("type") == "blob":
        row = conn.execute("SELECT text FROM ledger_blobs WHERE sha256 = ?", (content["sha256"],)).fetchone()
        return str(row[0])
    return str(content.get("text", ""))


def _message(conn: sqlite3.Connection, event: dict[str, Any]) -> dict[str, Any] | None:
    kind = event["type"]
    if kind == "SessionStarted":
        return {"role": "system", "content": event["system_prompt"]} if event["system_prompt"] else None
    if kind == "UserMessageAdded":
        return {"role": "user", "content": _text(conn, event["content"])}
    if kind == "ToolResultRecorded":
        return {"role": "tool", "tool_call_id": event["call_id"], "content": _text(conn, event["content"])}
    if kind == "AssistantMessageAdded":
        message: dict[str, Any] = {"role": "assistant", "content": _text(conn, event["content"]) or None}
        if event["tool_calls"]:
            message["tool_calls"] = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": c["arguments"]},
                }
                for c in event["tool_calls"]
            ]
        return message
    return None


def _events(conn: sqlite3.Connection, session_id: str, positions: list[int]) -> dict[int, dict[str, Any]]:
    found: dict[int, dict[str, Any]] = {}
    for start in range(0, len(positions), _PARAMS):
        chunk = positions[start : start + _PARAMS]
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(
            "SELECT originator_version, state FROM ledger_events "
            f"WHERE originator_id = ? AND originator_version IN ({marks})",
            (session_id, *chunk),
        )
        found.update((version, _DECODE.decode(state)) for version, state in rows)
    return found


class _Entry(msgspec.Struct):
    """The fields of a rendered entry the payload needs (others in the snapshot are skipped)."""

    seq: int
    role: str
    content: dict[str, Any] | None = None
    text: str | None = None
    tool_calls: list[dict[str, Any]] = []
    tool_call_id: str | None = None


class _Group(msgspec.Struct):
    entries: list[_Entry] = []


class _Window(msgspec.Struct):
    groups: list[_Group] = []


class _State(msgspec.Struct):
    system: str = ""
    window: _Window = msgspec.field(default_factory=_Window)


class _Snapshot(msgspec.Struct):
    state: _State


_SNAPSHOT = msgspec.msgpack.Decoder(_Snapshot)


def _entries(payload: bytes) -> dict[int, dict[str, Any]]:
    """The rendered entries of a render snapshot by position (only the fields a payload needs)."""
    state = _SNAPSHOT.decode(payload).state
    return {
        e.position: {
            "role": e.role,
            "content": e.content,
            "text": e.text,
            "tool_calls": e.tool_calls,
            "tool_call_id": e.tool_call_id,
        }
        for g in state.window.groups
        for e in g.entries
    }


def _entry_message(conn: sqlite3.Connection, entry: dict[str, Any]) -> dict[str, Any]:
    text = entry.get("text")
    if text is None:
        text = _text(conn, entry.get("content"))
    if entry["role"] == "tool":
        return {"role": "tool", "tool_call_id": entry.get("tool_call_id"), "content": text}
    if entry["role"] == "assistant" and entry.get("tool_calls"):
        calls = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in entry["tool_calls"]
        ]
        return {"role": "assistant", "content": text or None, "tool_calls": calls}
    return {"role": entry["role"], "content": text}


def cold_render_floor(db_path: str, session_id: str, shown: list[int]) -> bytes:
    """Open the file, read the snapshot and the events since it; build and return the request body.

    The shown messages come from the snapshot's entries (their stub or cut text when they have one,
    blob texts read from ``ledger_blobs``) or, when logged after the snapshot, from the events read
    since; a shown position found in neither is read from the log.

    Args:
        db_path: The SQLite file of the ledger.
        session_id: The session rendered.
        shown: The event positions the rendered context shows (its messages' sources), in order.
    """
    conn = sqlite3.connect(db_path)
    try:
        snapshot = conn.execute(
            "SELECT position, state FROM ledger_snapshots WHERE name LIKE ? ORDER BY position DESC LIMIT 1",
            (f"render/%{session_id}%",),
        ).fetchone()
        after, entries = 0, {}
        if snapshot is not None:
            after = snapshot[0]
            entries = _entries(snapshot[1])
        newer = {
            version: _DECODE.decode(state)
            for version, state in conn.execute(
                "SELECT originator_version, state FROM ledger_events "
                "WHERE originator_id = ? AND originator_version > ?",
                (session_id, after),
            )
        }
        missing = [p for p in shown if p not in newer and p not in entries]
        events = _events(conn, session_id, [1, *missing]) | newer
        messages = [] if (system := _message(conn, events[1])) is None else [system]
        for position in shown:
            if position in events:
                message = _message(conn, events[position])
                if message is not None:
                    messages.append(message)
            else:
                messages.append(_entry_message(conn, entries[position]))
        return _ENCODE.encode({"messages": messages})
    finally:
        conn.close()


class WarmFloor:
    """A warm process's floor: read the rows after the last one seen, add their messages, encode."""

    def __init__(self, db_path: str, session_id: str, position: int, messages: list[dict[str, Any]]) -> None:
        """Start from an already built message list at ``position``."""
        self.conn = sqlite3.connect(db_path)
        self.session_id = session_id
        self.position = position
        self.messages = list(messages)

    def step(self) -> bytes:
        """Read and decode the events appended since the last step, then encode the whole body."""
        rows = self.conn.execute(
            "SELECT originator_version, state FROM ledger_events "
            "WHERE originator_id = ? AND originator_version > ? ORDER BY originator_version",
            (self.session_id, self.position),
        ).fetchall()
        for version, state in rows:
            message = _message(self.conn, _DECODE.decode(state))
            if message is not None:
                self.messages.append(message)
            self.position = version
        return _ENCODE.encode({"messages": self.messages})

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()
