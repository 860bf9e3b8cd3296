"""OpenAI Chat Completions wire format: the ``messages`` and ``tools`` of a request body."""

from __future__ import annotations

import weakref
from functools import partial
from typing import Any

from contextledger.adapters.formats.common import object_schema, rewrite_id, wire_role
from contextledger.adapters.formats.media import chat_part, media_content
from contextledger.domain.events import ToolSchema
from contextledger.projections.context import RenderedContext, RenderedMessage, media_of
from contextledger.projections.wire import OPENAI_MAX_CALL_ID

__all__ = ["OPENAI_MAX_CALL_ID", "openai_call_id", "to_openai"]


def openai_call_id(call_id: str) -> str:
    """Return the id sent for a logged tool call id: unchanged up to 40 characters, else shortened.

    Args:
        call_id: The id as logged.

    Returns:
        The id itself, or a deterministic 40-character form (see ``common.rewrite_id``).
    """
    if len(call_id) <= OPENAI_MAX_CALL_ID:  # the common case, without the call (a render sends hundreds)
        return call_id
    return rewrite_id(call_id, max_length=OPENAI_MAX_CALL_ID)


def to_openai(ctx: RenderedContext) -> dict[str, Any]:
    """Return the Chat Completions request parts for ``ctx``: ``{"messages": [...], "tools": [...]}``.

    Mapping:

    - the system prompt is the first message (role ``system``), omitted when empty;
    - user messages and, whatever their neutral role, summaries and injections are role ``user``
      with string content (the summary heads the stable prefix; see ``common.USER_TEXT_KINDS``);
      a user message with image or file parts has a list of ``text`` parts and its parts
      (``media.chat_part``) in their order;
    - an assistant message carries ``tool_calls`` ``[{id, type: "function", function: {name,
      arguments}}]`` with ``content`` null when it has no text (``""`` when it has neither);
    - a tool result (stubbed and truncated ones included) is role ``tool`` with ``tool_call_id``.
      Chat Completions has no error flag: an error result is sent as its text, unchanged, so that
      the counted tokens stay exact;
    - tools are ``{"type": "function", "function": {name, description, parameters}}``; an empty
      description is omitted and the schema is made a ``type: object`` schema
      (``common.object_schema``); ``tools`` is omitted when there are none.

    Texts are sent verbatim; call ids longer than 40 characters are shortened deterministically
    (``openai_call_id``). A call id the provider reused after its result is sent as stored: Chat
    Completions only needs ids unique among the calls awaiting results, which the ledger's
    pairing rule guarantees (a result follows its call's message, answering its latest call).
    Equal contexts give equal payloads; the payload shares no mutable object with ``ctx``.

    Args:
        ctx: The rendered, provider-neutral context.

    Returns:
        A JSON-ready dict with ``messages`` and, when there are tools, ``tools``.

    Raises:
        InvalidMessageError: A message shape no provider can express (see ``common.wire_role``).
    """
    messages: list[dict[str, Any]] = []
    if ctx.system:
        messages.append({"role": "system", "content": ctx.system})
    messages.extend([_message(message, index) for index, message in enumerate(ctx.messages)])
    payload: dict[str, Any] = {"messages": messages}
    if ctx.tools:
        payload["tools"] = [_tool(tool) for tool in ctx.tools]
    return payload


_WIRE: dict[int, tuple[weakref.ref[RenderedMessage], dict[str, Any]]] = {}
"""The wire form of each live rendered message converted before, by the message's id.

An agent loop's requests re-send most of their window, and the renderer hands back the same
message objects for the entries still shown (ADR 0033), so their wire forms are copied, not built
again. An entry goes when its message is freed (a weak reference's callback), so the cache never
keeps a text alive; a message with media parts is not kept (its content nests deeper).
"""


def _message(message: RenderedMessage, index: int) -> dict[str, Any]:
    key = id(message)
    hit = _WIRE.get(key)
    if hit is not None and hit[0]() is message:
        return _fresh(hit[1])
    wire = _wire_message(message, index)
    if type(message) is RenderedMessage:
        _WIRE[key] = (weakref.ref(message, partial(_forget, key)), wire)
        return _fresh(wire)
    return wire


def _forget(key: int, ref: weakref.ref[RenderedMessage]) -> None:
    entry = _WIRE.get(key)
    if entry is not None and entry[0] is ref:  # not a newer message's entry under a reused id
        _WIRE.pop(key, None)


def _fresh(wire: dict[str, Any]) -> dict[str, Any]:
    """A copy of a kept wire message that shares no mutable object with it."""
    copy = dict(wire)
    calls = wire.get("tool_calls")
    if calls is not None:
        copy["tool_calls"] = [dict(call, function=dict(call["function"])) for call in calls]
    return copy


def _wire_message(message: RenderedMessage, index: int) -> dict[str, Any]:
    role = wire_role(message, index)
    if role == "tool":
        call_id = openai_call_id(message.tool_call_id or "")
        return {"role": "tool", "tool_call_id": call_id, "content": message.text}
    if role == "user":
        if media_of(message):
            return {
                "role": "user",
                "content": media_content(message.text, media_of(message), _text, chat_part),
            }
        return {"role": "user", "content": message.text}
    if not message.tool_calls:
        return {"role": "assistant", "content": message.text}
    limit = OPENAI_MAX_CALL_ID
    return {
        "role": "assistant",
        "content": message.text or None,
        "tool_calls": [
            {
                "id": call.id if len(call.id) <= limit else openai_call_id(call.id),
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in message.tool_calls
        ],
    }


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _tool(tool: ToolSchema) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool.name}
    if tool.description:
        function["description"] = tool.description
    function["parameters"] = object_schema(tool.parameters)
    if isinstance(tool.strict, bool):
        function["strict"] = tool.strict
    return {"type": "function", "function": function}
