"""OpenAI Responses wire format: ``instructions``, ``input`` items and function ``tools`` of a request."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from contextledger.adapters.formats.anthropic import anthropic_call_ids
from contextledger.adapters.formats.common import object_schema, wire_role
from contextledger.adapters.formats.media import media_content, responses_part
from contextledger.domain.events import ToolSchema
from contextledger.projections.context import RenderedContext, media_of

__all__ = ["to_openai_responses"]


def to_openai_responses(
    ctx: RenderedContext, reasoning: Mapping[int, Sequence[Mapping[str, Any]]] | None = None
) -> dict[str, Any]:
    """Return the Responses request parts for ``ctx``: ``{"instructions", "input", "tools"}``.

    Mapping:

    - the system prompt is ``instructions``, omitted when empty;
    - user messages, summaries and injections are ``{"role": "user", "content": text}`` items; a
      user message with image or file parts has ``input_text`` parts and its parts
      (``media.responses_part``) in their order;
    - an assistant message is a ``{"role": "assistant", "content": text}`` item when it has text,
      then one ``{"type": "function_call", "call_id", "name", "arguments"}`` item per call;
    - a tool result is a ``{"type": "function_call_output", "call_id", "output"}`` item (the API has
      no error flag: an error result is sent as its text);
    - tools are ``{"type": "function", "name", "description", "parameters"}``, omitted when none.

    Call ids are made unique in the request like the Anthropic format's (``anthropic_call_ids``:
    a provider's reused id gets a ``_n`` suffix; ``stored_id`` maps back). ``reasoning`` maps the
    index of an assistant message to ready items sent just before it (the encrypted ``reasoning``
    item of the current tool-use turn and the hosted tool items that followed it).

    Args:
        ctx: The rendered, provider-neutral context.
        reasoning: Reasoning and hosted items by message index.

    Returns:
        A JSON-ready dict with ``input`` and, when not empty, ``instructions`` and ``tools``.
    """
    ids = anthropic_call_ids(ctx)
    items: list[dict[str, Any]] = []
    for index, message in enumerate(ctx.messages):
        role = wire_role(message, index)
        if role == "tool":
            items.append(
                {"type": "function_call_output", "call_id": ids.results[index], "output": message.text}
            )
        elif role == "user" and media_of(message):
            content = media_content(message.text, media_of(message), _input_text, responses_part)
            items.append({"role": "user", "content": content})
        elif role == "user":
            items.append({"role": "user", "content": message.text})
        else:
            if reasoning and index in reasoning:
                items.extend(dict(item) for item in reasoning[index])
            if message.text or not message.tool_calls:
                items.append({"role": "assistant", "content": message.text})
            items.extend(
                {"type": "function_call", "call_id": wire_id, "name": call.name, "arguments": call.arguments}
                for call, wire_id in zip(message.tool_calls, ids.calls[index], strict=True)
            )
    payload: dict[str, Any] = {}
    if ctx.system:
        payload["instructions"] = ctx.system
    payload["input"] = items
    if ctx.tools:
        payload["tools"] = [_tool(tool) for tool in ctx.tools]
    return payload


def _input_text(text: str) -> dict[str, Any]:
    return {"type": "input_text", "text": text}


def _tool(tool: ToolSchema) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "function", "name": tool.name}
    if tool.description:
        out["description"] = tool.description
    out["parameters"] = object_schema(tool.parameters)
    if isinstance(tool.strict, bool):
        out["strict"] = tool.strict
    return out
