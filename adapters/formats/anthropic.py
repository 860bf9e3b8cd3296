"""Anthropic Messages wire format: ``system`` apart, content blocks, cache breakpoints."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
from contextledger.adapters.formats.common import is_blank, object_schema, rewrite_id, wire_role
from contextledger.adapters.formats.media import anthropic_part, media_content
from contextledger.domain.events import ToolSchema
from contextledger.projections.context import RenderedContext, RenderedMessage, media_of
from contextledger.projections.wire import ANTHROPIC_ID, ANTHROPIC_MAX_CALL_ID, RAW_ARGUMENTS_KEY, tool_input

__all__ = [
    "ANTHROPIC_MAX_CALL_ID",
    "EMPTY_ERROR_RESULT",
    "LEADING_USER_PLACEHOLDER",
    "RAW_ARGUMENTS_KEY",
    "AnthropicCallIds",
    "anthropic_call_id",
    "anthropic_call_ids",
    "to_anthropic",
    "tool_input",
]

LEADING_USER_PLACEHOLDER = "[conversation continues]"
"""Text of the user message put first when the history would not start with a user message."""

EMPTY_ERROR_RESULT = "[error: the tool returned no output]"
"""Content of an error ``tool_result`` whose text is blank (the API needs content when ``is_error``)."""


def anthropic_call_id(call_id: str) -> str:
    """Return the ``tool_use`` id sent for a logged call id (the API requires ``^[a-zA-Z0-9_-]+$``).

    Args:
        call_id: The id as logged, e.g. ``call_7`` (kept) or ``Bash:12`` (rewritten).

    Returns:
        The id itself when accepted, else a deterministic accepted form (see ``common.rewrite_id``).
    """
    return rewrite_id(call_id, max_length=ANTHROPIC_MAX_CALL_ID, allowed=ANTHROPIC_ID)


class AnthropicCallIds(msgspec.Struct, frozen=True, kw_only=True):
    """The ``tool_use`` ids of one Messages request, and the way back to the stored call ids.

    ``calls[i]`` holds the wire id of each tool call of ``ctx.messages[i]``; ``results[i]`` the wire
    id a tool result at ``i`` answers (None for other messages); ``stored`` maps every wire id to
    the call id as the ledger stores it (the provider's own id).
    """

    calls: tuple[tuple[str, ...], ...]
    results: tuple[str | None, ...]
    stored: dict[str, str]

    def stored_id(self, wire_id: str) -> str:
        """Return the stored call id of a ``tool_use`` id of this request.

        An id the request does not hold (a new ``tool_use`` of the model's reply) is returned as
        it is: that is the id to store.
        """
        return self.stored.get(wire_id, wire_id)


def anthropic_call_ids(ctx: RenderedContext) -> AnthropicCallIds:
    """Return the ``tool_use`` ids ``to_anthropic`` sends for ``ctx``: unique in the request.

    The Messages API requires every ``tool_use`` id of a request to be unique, but providers reuse
    a call id once it is answered (gpt-4o does) and the ledger stores it as given. The first call
    with an id in the request keeps ``anthropic_call_id(id)``; a later call with the same id gets
    ``<id>_<n>`` (``n`` from 2, cut to ``ANTHROPIC_MAX_CALL_ID``), skipping any id already used in
    the request or kept by another call. A result answers the latest call issued before it with its
    id (the ledger's pairing rule), so it gets that call's wire id. Deterministic: equal contexts
    give equal ids.

    Args:
        ctx: The rendered, provider-neutral context.

    Returns:
        The wire ids per message and the reverse mapping (``AnthropicCallIds.stored_id``).
    """
    kept = {anthropic_call_id(call.id) for message in ctx.messages for call in message.tool_calls}
    used: set[str] = set()
    latest: dict[str, str] = {}
    stored: dict[str, str] = {}
    calls: list[tuple[str, ...]] = []
    results: list[str | None] = []
    for message in ctx.messages:
        wire_ids: list[str] = []
        for call in message.tool_calls:
            wire = _unused(anthropic_call_id(call.id), used, kept)
            used.add(wire)
            latest[call.id] = wire
            stored[wire] = call.id
            wire_ids.append(wire)
        calls.append(tuple(wire_ids))
        call_id = message.tool_call_id
        results.append(None if call_id is None else latest.get(call_id, anthropic_call_id(call_id)))
    return AnthropicCallIds(calls=tuple(calls), results=tuple(results), stored=stored)


def _unused(base: str, used: set[str], kept: set[str]) -> str:
    """Return ``base`` if no call of the request has it yet, else the first free ``<base>_<n>``."""
    if base not in used:
        return base
    n = 2
    while True:
        suffix = f"_{n}"
        wire = base[: ANTHROPIC_MAX_CALL_ID - len(suffix)] + suffix
        if wire not in used and wire not in kept:
            return wire
        n += 1


def to_anthropic(
    ctx: RenderedContext, leading: Mapping[int, Sequence[Mapping[str, Any]]] | None = None
) -> dict[str, Any]:
    """Return the Messages request parts for ``ctx``: ``{"system", "messages", "tools"}``.

    Mapping:

    - ``system`` is a list with one text block, omitted (like ``tools``) when blank;
    - every message's ``content`` is a list of blocks; blank text blocks are never emitted (the API
      rejects empty and whitespace-only text), so a message with nothing else left is skipped;
    - user messages and, whatever their neutral role, summaries and injections are user text
      blocks (see ``common.USER_TEXT_KINDS``); a user message's image and file parts are
      ``image``/``document`` blocks (``media.anthropic_part``) among its text blocks, in order;
    - an assistant message is its text block then one ``tool_use`` block per call; ``input`` is the
      parsed arguments object (``tool_input`` wraps anything else);
    - a tool result (stubs and truncations included) is a ``tool_result`` block in a user message,
      with ``is_error: true`` when it failed; blank content is omitted, or replaced by
      ``EMPTY_ERROR_RESULT`` for an error (the API requires content then);
    - consecutive messages of the same wire role are merged into one message, so the roles
      alternate and consecutive results share one user message;
    - if the first message would not be a user message (a window starting on an assistant
      message), or there is none, a user message ``LEADING_USER_PLACEHOLDER`` is put first; one is put
      last when the context ends on a user message with nothing to send (a blank text), so the request
      never ends on the assistant's answer (a prefill).

    Cache breakpoints (``cache_control: {"type": "ephemeral"}``, at most 3 of the API's 4):

    - the end of the stable prefix: the last block of ``ctx.messages[:ctx.stable_prefix]``;
    - the end of system and tools: the system block, or the last tool when there is no system.
      It is the stable-prefix breakpoint when that prefix is empty, and otherwise keeps the
      system prompt cached across compactions, which change the summary after it;
    - the last block of the final message (rolling breakpoint).

    Call ids the API would reject are rewritten deterministically (``anthropic_call_id``), and a
    call id the provider reused after its result (stored as given) is made unique in the request
    (``anthropic_call_ids``, whose ``stored_id`` maps a wire id back to the stored one).
    Equal contexts give equal payloads; the payload shares no mutable object with ``ctx``.

    ``leading`` maps the index of an assistant message to blocks put first in it, exactly as given
    (the server tool blocks of the current turn, see ``providers.anthropic_messages``).

    Args:
        ctx: The rendered, provider-neutral context.
        leading: Blocks put first in assistant messages, by message index.

    Returns:
        A JSON-ready dict with ``messages`` and, when not empty, ``system`` and ``tools``.

    Raises:
        InvalidMessageError: A message shape no provider can express (see ``common.wire_role``).
    """
    system: list[dict[str, Any]] = [] if is_blank(ctx.system) else [{"type": "text", "text": ctx.system}]
    tools = [_tool(tool) for tool in ctx.tools]
    ids = anthropic_call_ids(ctx)
    messages: list[dict[str, Any]] = []
    last_blocks: list[dict[str, Any] | None] = []
    for index, message in enumerate(ctx.messages):
        role = wire_role(message, index)
        blocks = _blocks(message, role, ids.calls[index], ids.results[index])
        if leading and index in leading and role == "assistant":
            blocks[:0] = [dict(block) for block in leading[index]]
        last_blocks.append(blocks[-1] if blocks else None)
        if not blocks:
            continue
        side = "assistant" if role == "assistant" else "user"
        if messages and messages[-1]["role"] == side:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": side, "content": blocks})
    _user_at_both_ends(messages, ends_on_user=bool(ctx.messages) and ctx.messages[-1].role == "user")

    head: dict[str, Any] | None = system[-1] if system else (tools[-1] if tools else None)
    stable = next((b for b in reversed(last_blocks[: ctx.stable_prefix]) if b is not None), head)
    final: dict[str, Any] = messages[-1]["content"][-1]
    marked: set[int] = set()
    for block in (head, stable, final):
        if block is not None and id(block) not in marked:
            marked.add(id(block))
            block["cache_control"] = {"type": "ephemeral"}

    payload: dict[str, Any] = {}
    if system:
        payload["system"] = system
    payload["messages"] = messages
    if tools:
        payload["tools"] = tools
    return payload


def _user_at_both_ends(messages: list[dict[str, Any]], *, ends_on_user: bool) -> None:
    """Put ``LEADING_USER_PLACEHOLDER`` first when no user message is, and last when one sent nothing.

    A context ending on a blank user message would make the request end on the assistant's last answer,
    a prefill the model continues (refused with extended thinking on).
    """
    if not messages or messages[0]["role"] != "user":
        messages.insert(0, {"role": "user", "content": [{"type": "text", "text": LEADING_USER_PLACEHOLDER}]})
    if ends_on_user and messages[-1]["role"] != "user":
        messages.append({"role": "user", "content": [{"type": "text", "text": LEADING_USER_PLACEHOLDER}]})


def _blocks(
    message: RenderedMessage, role: str, call_ids: tuple[str, ...], result_id: str | None
) -> list[dict[str, Any]]:
    if role == "tool":
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": result_id or ""}
        if not is_blank(message.text):
            block["content"] = message.text
        elif message.is_error:
            block["content"] = EMPTY_ERROR_RESULT
        if message.is_error:
            block["is_error"] = True
        return [block]
    if media_of(message) and role == "user":
        return media_content(message.text, media_of(message), _text, anthropic_part)
    blocks: list[dict[str, Any]] = [] if is_blank(message.text) else [_text(message.text)]
    if role == "assistant":
        blocks.extend(
            {"type": "tool_use", "id": wire_id, "name": call.name, "input": tool_input(call.arguments)}
            for call, wire_id in zip(message.tool_calls, call_ids, strict=True)
        )
    return blocks


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _tool(tool: ToolSchema) -> dict[str, Any]:
    out: dict[str, Any] = {"name": tool.name}
    if tool.description:
        out["description"] = tool.description
    out["input_schema"] = object_schema(tool.parameters)
    if isinstance(tool.strict, bool):
        out["strict"] = tool.strict
    return out
