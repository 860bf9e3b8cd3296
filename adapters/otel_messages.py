"""A rendered context as GenAI `gen_ai.input.messages` parts (a summary as a `compaction` part)."""

from __future__ import annotations

import json
from typing import Any

from contextledger.projections.context import RenderedContext, RenderedMessage

__all__ = ["input_messages", "system_instructions"]


def _arguments(text: str) -> object:
    """A tool call's arguments as JSON when they parse (the convention's ``arguments`` is any value)."""
    try:
        return json.loads(text) if text else None
    except ValueError:
        return text


def _parts(message: RenderedMessage, summary_id: str | None) -> list[dict[str, Any]]:
    """The convention's parts for one rendered message.

    A summary block is the convention's ``compaction`` part (its id is the summary artifact's); a
    tool result (verbatim, truncated or stubbed) is a ``tool_call_response``; the assistant's tool
    calls are ``tool_call`` parts after its text.
    """
    if message.kind == "summary":
        return [{"type": "compaction", "id": summary_id, "content": message.text}]
    if message.role == "tool":
        return [{"type": "tool_call_response", "id": message.tool_call_id, "response": message.text}]
    parts: list[dict[str, Any]] = []
    if message.text:
        parts.append({"type": "text", "content": message.text})
    parts += [
        {"type": "tool_call", "id": call.id, "name": call.name, "arguments": _arguments(call.arguments)}
        for call in message.tool_calls
    ]
    return parts


def input_messages(context: RenderedContext) -> list[dict[str, Any]]:
    """The context's messages after the system prompt, in the ``gen_ai.input.messages`` schema."""
    return [
        {"role": message.role, "parts": _parts(message, context.summary_id)} for message in context.messages
    ]


def system_instructions(context: RenderedContext) -> list[dict[str, Any]]:
    """The system prompt as ``gen_ai.system_instructions`` (one text part; empty when there is none)."""
    return [{"type": "text", "content": context.system}] if context.system else []
