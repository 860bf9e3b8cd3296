"""Anthropic Messages API transcripts, and the content-block mapping Claude Code sessions share."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any, Literal

import msgspec
from contextledger.adapters.importers.base import CallBook, SessionDraft, media_part
from contextledger.adapters.importers.source import Source
from contextledger.application.kernel.wire_shapes import HOSTED_BLOCKS, HOSTED_ITEMS, THINKING_BLOCKS

__all__ = ["Block", "add_user_blocks", "extend_assistant", "new_assistant", "parse_anthropic", "result_text"]


class Block(msgspec.Struct, kw_only=True):
    """One content block (text, thinking, tool_use, tool_result, image, ...); unknown fields ignored."""

    type: str
    text: str | None = None
    thinking: str | None = None
    signature: str | None = None
    data: str | None = None
    """A ``redacted_thinking`` block's encrypted reasoning."""
    id: str | None = None
    name: str | None = None
    input: Any = None
    tool_use_id: str | None = None
    content: Any = None
    """A ``tool_result``'s text or blocks; a server tool result's list or error object."""
    is_error: bool | None = None
    server_name: str | None = None
    """An ``mcp_tool_use`` block's server."""
    file_id: str | None = None
    """A ``container_upload`` block's file."""
    source: Any = None
    """An ``image`` or ``document`` block's source (base64, URL or file id)."""
    title: str | None = None
    """A ``document`` block's title."""


class AMessage(msgspec.Struct, kw_only=True):
    """A Messages API message: a role and a string or a list of blocks."""

    role: Literal["user", "assistant"]
    content: str | list[Block]


class ATool(msgspec.Struct, kw_only=True):
    """A tool definition of a Messages API request."""

    name: str
    description: str = ""
    input_schema: dict[str, Any] = {}
    strict: bool | None = None


class AResponse(msgspec.Struct, kw_only=True):
    """A Messages API response: the final assistant turn."""

    content: list[Block]
    id: str | None = None
    model: str | None = None
    usage: dict[str, Any] | None = None
    stop_reason: str | None = None


class ARequest(msgspec.Struct, kw_only=True):
    """A Messages API request body, optionally with the response it got."""

    messages: list[AMessage]
    model: str | None = None
    system: str | list[Block] | None = None
    tools: list[ATool] = []
    id: str | None = None
    response: AResponse | None = None


def _need(source: Source, value: str | None, path: str, what: str) -> str:
    if not isinstance(value, str):
        raise source.error(path, f"expected {what} (a string)")
    return value


_HOSTED_FIELDS = (
    "type",
    "id",
    "name",
    "server_name",
    "input",
    "tool_use_id",
    "is_error",
    "content",
    "file_id",
)
"""The fields of Anthropic's server tool blocks (``HOSTED_BLOCKS``), in the order the API gives them."""


def hosted_block(block: Block) -> dict[str, Any]:
    """Return a server tool block (``server_tool_use``, ``web_search_tool_result``...) as the API gave it."""
    return {f: getattr(block, f) for f in _HOSTED_FIELDS if getattr(block, f) is not None}


def result_text(content: object, draft: SessionDraft) -> str:
    """Return the text of a ``tool_result`` content (string or blocks); report dropped non-text blocks."""
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        draft.note("tool results whose content is neither text nor blocks were stored empty")
        return ""
    texts: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            draft.note("tool result content items that are not blocks were dropped")
        elif block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        else:
            draft.note(f"non-text blocks ({block.get('type')}) inside tool results were dropped")
    return "\n".join(texts)


def new_assistant(meta: dict[str, Any], model: str | None, at: datetime | None) -> dict[str, Any]:
    """Return an empty assistant message dict that ``extend_assistant`` fills."""
    message: dict[str, Any] = {"role": "assistant", "content": None, "reasoning": None, "tool_calls": []}
    message |= {"model": model, "at": at, "meta": meta}
    return message


def _join(old: str | None, new: str) -> str:
    return new if old is None else f"{old}\n\n{new}"


def extend_assistant(
    source: Source,
    draft: SessionDraft,
    message: dict[str, Any],
    blocks: list[Block],
    *,
    path: str,
    book: CallBook,
) -> None:
    """Add assistant blocks to ``message``: text to content, thinking to reasoning, tool_use to calls.

    Several text (or thinking) blocks are joined with a blank line. Each signed ``thinking`` block and
    each ``redacted_thinking`` block is also kept exactly, in order, in ``meta[THINKING_BLOCKS]``, as the
    agent loop stores a reply's (``wire_shapes``): a session resumed mid tool-use turn sends them back
    unchanged, which Anthropic requires while extended thinking is on.
    """
    for index, block in enumerate(blocks):
        where = f"{path}[{index}]"
        if block.type == "text":
            message["content"] = _join(message["content"], _need(source, block.text, f"{where}.text", "text"))
        elif block.type == "thinking":
            thought = _need(source, block.thinking, f"{where}.thinking", "thinking")
            message["reasoning"] = _join(message["reasoning"], thought)
            if block.signature:
                signed = {"type": "thinking", "thinking": thought, "signature": block.signature}
                message["meta"].setdefault(THINKING_BLOCKS, []).append(signed)
        elif block.type == "tool_use":
            call_name = _need(source, block.name, f"{where}.name", "a tool name")
            call_id = book.issue(_need(source, block.id, f"{where}.id", "a tool_use id"), call_name)
            arguments = block.input if isinstance(block.input, dict | str) else {}
            message["tool_calls"].append({"id": call_id, "name": call_name, "arguments": arguments})
        elif block.type == "redacted_thinking" and block.data:
            redacted = {"type": "redacted_thinking", "data": block.data}
            message["meta"].setdefault(THINKING_BLOCKS, []).append(redacted)
        elif block.type == "redacted_thinking":
            draft.note("redacted_thinking blocks without their data were dropped")
        elif block.type in HOSTED_BLOCKS:
            message["meta"].setdefault(HOSTED_ITEMS, []).append(hosted_block(block))
        else:
            draft.note(f"assistant '{block.type}' blocks have no ledger field and were dropped")


def add_user_blocks(
    source: Source,
    draft: SessionDraft,
    blocks: list[Block],
    *,
    path: str,
    book: CallBook,
    meta: dict[str, Any],
    at: datetime | None,
) -> int:
    """Append a user turn's blocks: ``tool_result`` blocks become tool results, text a user message.

    Returns the number of messages appended.
    """
    texts: list[str] = []
    media: list[dict[str, Any]] = []
    added = 0
    for index, block in enumerate(blocks):
        where = f"{path}[{index}]"
        if block.type == "tool_result":
            source_id = _need(source, block.tool_use_id, f"{where}.tool_use_id", "a tool_use_id")
            call_id = book.resolve(source_id)
            if call_id is None:
                draft.metadata.setdefault("dropped_results", []).append(
                    {"source_ref": where, "call_id": source_id}
                )
                draft.note("tool results naming no open tool_use cannot be stored: dropped, see metadata")
                continue
            result_meta = dict(meta) | {"source_ref": where}
            draft.messages.append(
                {
                    "role": "tool",
                    "call_id": call_id,
                    "content": result_text(block.content, draft),
                    "tool_name": book.name_of(call_id),
                    "is_error": bool(block.is_error),
                    "at": at,
                    "meta": result_meta,
                }
            )
            added += 1
        elif block.type == "text":
            texts.append(_need(source, block.text, f"{where}.text", "text"))
        elif block.type in ("image", "document"):
            part = {"type": block.type, "source": block.source, "title": block.title}
            found = media_part(part, len("\n\n".join(texts)), draft)
            if found is not None:
                media.append(found)
        else:
            draft.note(f"user '{block.type}' blocks were dropped: the ledger keeps text, images and files")
    if texts or media:
        user = {"role": "user", "content": "\n\n".join(texts), "at": at, "meta": dict(meta)}
        if not texts:
            draft.media_only.add(len(draft.messages))
        draft.messages.append({**user, "media": media} if media else user)
        added += 1
    return added


def _request_session(source: Source, request: ARequest, path: str) -> SessionDraft:
    draft = SessionDraft("anthropic", source.path, request.id or "", source_ref=path, model=request.model)
    if isinstance(request.system, list):
        draft.system_prompt = "\n\n".join(b.text for b in request.system if b.type == "text" and b.text)
    else:
        draft.system_prompt = request.system or ""
    draft.tools = [
        {"name": t.name, "description": t.description, "parameters": t.input_schema}
        | ({} if t.strict is None else {"strict": t.strict})
        for t in request.tools
    ]
    draft.source_messages = len(request.messages)
    book = CallBook()
    base = f"{path}.messages" if path else "$"
    for index, message in enumerate(request.messages):
        where = f"{base}[{index}]"
        if message.role == "user":
            if isinstance(message.content, str):
                draft.messages.append(
                    {"role": "user", "content": message.content, "meta": {"source_ref": where}}
                )
            else:
                add_user_blocks(
                    source,
                    draft,
                    message.content,
                    path=f"{where}.content",
                    book=book,
                    meta={"source_ref": where},
                    at=None,
                )
            continue
        reply = new_assistant({"source_ref": where}, request.model, None)
        if isinstance(message.content, str):
            reply["content"] = message.content
        else:
            extend_assistant(source, draft, reply, message.content, path=f"{where}.content", book=book)
        draft.messages.append(reply)
    if request.response is not None:
        draft.source_messages += 1
        reply = new_assistant(
            {"source_ref": f"{path or '$'}.response"}, request.response.model or request.model, None
        )
        if request.response.usage:
            reply["meta"]["usage"] = request.response.usage
        extend_assistant(
            source, draft, reply, request.response.content, path=f"{path or '$'}.response.content", book=book
        )
        draft.messages.append(reply)
    return draft


def parse_anthropic(source: Source) -> Iterator[SessionDraft]:
    """Parse Messages API transcripts into one session per request or message list, one at a time.

    Accepted: a request body (``messages``, ``system``, ``tools``, optional ``response``), a list
    of messages, a list of requests, or JSON Lines of either.
    """
    if source.looks_like_json_lines():
        if source.all_lines_with("role"):
            messages = [source.convert(v, AMessage, f"line {n}: $") for n, v in source.lines()]
            yield _request_session(source, ARequest(messages=messages), "")
            return
        for n, v in source.lines():
            yield _request_session(source, source.convert(v, ARequest, f"line {n}: $"), f"line {n}")
        return
    if source.is_array:
        if source.all_objects_with("role"):
            messages = source.convert(source.document, list[AMessage], "$")
            yield _request_session(source, ARequest(messages=messages), "")
            return
        for i, raw in enumerate(source.elements):
            request = source.convert(source.element(raw), ARequest, f"$[{i}]")
            yield _request_session(source, request, f"$[{i}]")
        return
    document = source.document
    if isinstance(document, dict):
        yield _request_session(source, source.convert(document, ARequest, "$"), "$")
        return
    raise source.error(
        "$", f"expected a Messages API request object or message list, got {type(document).__name__}"
    )
