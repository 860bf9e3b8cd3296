"""Provider shapes at the boundary: OpenAI and Anthropic messages, calls and schemas as ledger shapes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contextledger.application.kernel.media_shapes import MEDIA_PARTS, ledger_media
from contextledger.domain.errors import InvalidMessageError

__all__ = [
    "HOSTED_BLOCKS",
    "HOSTED_ITEMS",
    "THINKING_BLOCKS",
    "as_plain",
    "ledger_messages",
    "ledger_tool_call",
    "ledger_tool_schema",
]

THINKING_BLOCKS = "thinking_blocks"
"""Key of an assistant event's ``meta`` keeping its Anthropic thinking blocks (several, or redacted)."""

HOSTED_ITEMS = "hosted_items"
"""Key of an assistant event's ``meta`` keeping, exactly as the reply gave them, the items of tools the
provider ran itself: Responses ``web_search_call``, ``file_search_call``, ``code_interpreter_call``,
``image_generation_call``, ``mcp_call``...; Anthropic ``server_tool_use`` and its result blocks."""

HOSTED_BLOCKS = frozenset(
    {
        "server_tool_use",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "mcp_tool_use",
        "mcp_tool_result",
        "container_upload",
    }
)
"""Anthropic content blocks of server tools (run by Anthropic, not by the caller)."""

_IGNORED_ASSISTANT_KEYS = frozenset(
    {"refusal", "annotations", "audio", "function_call", "name", "type", "id", "reasoning_content"}
)
"""Keys of a provider's assistant message the ledger does not keep (citations, audio, ids of the reply)."""


_TEXT_PARTS = frozenset({"text", "input_text", "output_text"})
"""Text part types: Chat Completions and Anthropic ``text``, Responses ``input_text``/``output_text``."""


def as_plain(raw: object) -> Any:
    """Return an SDK object (a pydantic model with ``model_dump``) as its JSON-ready dict; else ``raw``.

    This module is the one place where a provider's shape (an OpenAI Chat Completions or Responses
    item, an Anthropic Messages block, or the SDK object of either) becomes the ledger's shape;
    ``application.messages`` validates the result. No SDK is imported here.
    """
    dump = getattr(raw, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=True)
    return raw


def _fail(message: str) -> InvalidMessageError:
    return InvalidMessageError(message)


def _text(content: object, what: str) -> str:
    """Return the text of a string content or a list of text parts (``text``, ``input_text``...)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            part_type = part.get("type") if isinstance(part, dict) else None
            if part_type not in {"text", "input_text", "output_text"} or not isinstance(
                part.get("text"), str
            ):
                msg = f"{what}: only text parts are accepted, not {part_type or type(part).__name__!r}"
                raise _fail(msg)
            parts.append(part["text"])
        return "".join(parts)
    if content is None:
        return ""
    msg = f"{what}: content must be text or a list of text parts, not {type(content).__name__}"
    raise _fail(msg)


def ledger_tool_call(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Return a tool call in the ledger's shape ``{id, name, arguments}`` from any provider's shape.

    Accepted: the ledger's own; OpenAI Chat ``{id, type: "function", function: {name, arguments}}``;
    OpenAI Responses ``{type: "function_call", call_id, name, arguments}``; Anthropic ``{type:
    "tool_use", id, name, input}``.
    """
    raw = as_plain(raw)
    if not isinstance(raw, Mapping):
        return raw
    if isinstance(raw.get("function"), Mapping):
        function = raw["function"]
        return {
            "id": raw.get("id"),
            "name": function.get("name"),
            "arguments": function.get("arguments", "{}"),
        }
    if raw.get("type") == "function_call":
        return {"id": raw.get("call_id"), "name": raw.get("name"), "arguments": raw.get("arguments", "{}")}
    if raw.get("type") == "tool_use":
        return {"id": raw.get("id"), "name": raw.get("name"), "arguments": raw.get("input", {})}
    return dict(raw)


def ledger_tool_schema(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Return a tool schema in the ledger's shape ``{name, description, parameters}``.

    Accepted: the ledger's own; OpenAI Chat ``{type: "function", function: {...}}``; OpenAI Responses
    ``{type: "function", name, parameters}``; Anthropic ``{name, description, input_schema}``
    (``cache_control`` is the request's business and is dropped); an MCP ``Tool``
    (object or dict) ``{name, title?, description?, inputSchema, outputSchema?, annotations?}``,
    whose input schema is the parameters (the rest is for the client, never sent to a model).
    A boolean ``strict`` flag (OpenAI Chat, inside ``function``; Responses and Anthropic, on the
    tool) is kept, so the wire that sent it sends it again.
    """
    raw = as_plain(raw)
    if not isinstance(raw, Mapping):
        return raw
    source: Mapping[str, Any] = raw
    if raw.get("type") == "function" and isinstance(raw.get("function"), Mapping):
        source = raw["function"]
    elif "input_schema" in raw:
        source = {**raw, "parameters": raw["input_schema"]}
    elif "inputSchema" in raw:
        source = {**raw, "parameters": raw["inputSchema"]}
    elif raw.get("type") != "function":
        return dict(raw)
    out = {k: source[k] for k in ("name", "description", "parameters") if k in source}
    if isinstance(source.get("strict"), bool):
        out["strict"] = source["strict"]
    if out.get("description") is None:
        out.pop("description", None)
    return out


def _assistant(raw: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {k: v for k, v in raw.items() if k not in _IGNORED_ASSISTANT_KEYS}
    if raw.get("reasoning_content") is not None and out.get("reasoning") is None:
        out["reasoning"] = raw["reasoning_content"]
    content = raw.get("content")
    if content is None and isinstance(raw.get("refusal"), str):
        out["content"] = raw["refusal"]  # the model's refusal is its answer
    calls = [ledger_tool_call(c) for c in raw.get("tool_calls") or ()]
    if isinstance(content, list):
        meta = raw.get("meta") or {}
        if not isinstance(meta, Mapping):
            msg = f"an assistant message's meta must be an object, not {type(meta).__name__}"
            raise InvalidMessageError(msg)
        out.update(_assistant_blocks(content, calls, dict(meta)))
    out["tool_calls"] = calls
    return out


def _block_text(block: Mapping[str, Any], field: str, kind: str) -> str:
    """A block's text field: text, or empty when absent; any other value is refused, never ``str()``-ed.

    A ``"text": null`` block became the word ``None`` sent back to the model on every later request.
    """
    value = block.get(field, "")
    if not isinstance(value, str):
        msg = f"assistant message: a {kind!r} block's {field!r} must be text, not {type(value).__name__}"
        raise _fail(msg)
    return value


def _assistant_blocks(  # noqa: C901, PLR0912 - one branch per block type
    content: list[Any], calls: list[dict[str, Any]], meta: dict[str, Any]
) -> dict[str, Any]:
    """Anthropic assistant blocks: text to content, thinking to reasoning (+ signature), tool_use to calls.

    Server tool blocks (``HOSTED_BLOCKS``) are kept exactly, in order, in ``meta[HOSTED_ITEMS]``.

    One signed ``thinking`` block keeps its signature in ``reasoning_signature``; several signed thinking
    blocks, or any ``redacted_thinking`` block, are also kept exactly in ``meta[THINKING_BLOCKS]``,
    since the API needs them back unchanged while their tool-use turn lasts. A thinking block without a
    signature (some compatible servers send none) is kept as reasoning text only: the API refuses a
    thinking block sent back with ``"signature": null``.
    """
    texts: list[str] = []
    thoughts: list[str] = []
    signed: list[dict[str, Any]] = []
    hosted: list[dict[str, Any]] = []
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind in _TEXT_PARTS:
            texts.append(_block_text(block, "text", kind))
        elif kind == "thinking":
            thoughts.append(_block_text(block, "thinking", kind))
            signature = block.get("signature")
            if isinstance(signature, str) and signature:  # unsigned (a compatible server's): text only
                signed.append({"type": "thinking", "thinking": thoughts[-1], "signature": signature})
        elif kind == "redacted_thinking":
            signed.append({"type": "redacted_thinking", "data": block.get("data")})
        elif kind == "tool_use":
            calls.append(ledger_tool_call(block))
        elif kind in HOSTED_BLOCKS:
            hosted.append(dict(block))
        else:
            msg = f"assistant message: a {kind or type(block).__name__!r} block is not accepted"
            raise _fail(msg)
    out: dict[str, Any] = {"content": "".join(texts) or None}
    if thoughts:
        out["reasoning"] = "\n\n".join(thoughts)
    if hosted:
        meta = {**meta, HOSTED_ITEMS: hosted}
    if len(signed) == 1 and signed[0]["type"] == "thinking" and len(thoughts) == 1:
        out["reasoning_signature"] = signed[0]["signature"]
    elif signed:
        meta = {**meta, THINKING_BLOCKS: signed}
    if meta:
        out["meta"] = meta
    return out


def _user(raw: Mapping[str, Any]) -> list[dict[str, Any]]:
    content = raw.get("content")
    if not isinstance(content, list):
        return [dict(raw)]
    results: list[dict[str, Any]] = []
    texts: list[str] = []
    media: list[dict[str, Any]] = []
    chars = 0
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "tool_result":
            results.append(
                {
                    "role": "tool",
                    "call_id": block.get("tool_use_id"),
                    "content": _text(block.get("content"), "tool_result"),
                    "is_error": bool(block.get("is_error", False)),
                }
            )
        elif kind in MEDIA_PARTS:
            media.append(ledger_media(block, chars))
        else:
            texts.append(_text([block], "user message"))
            chars += len(texts[-1])
    rest = {k: v for k, v in raw.items() if k != "content"}
    if texts or media:
        results.append({**rest, "content": "".join(texts), **({"media": media} if media else {})})
    return results


def ledger_messages(raw: object) -> list[Any]:
    """Return the ledger-shaped message dicts of one message in any provider's shape (one, or several).

    An Anthropic user message holding ``tool_result`` blocks becomes one tool result per block, then
    the user's text (if any). An OpenAI ``tool`` message (``tool_call_id``), a Responses
    ``function_call_output`` item, an assistant message with OpenAI ``tool_calls`` or Anthropic
    content blocks (``text``, ``thinking`` with its signature, ``tool_use``) each become one message.
    Anything already in the ledger's shape is returned as it is, for validation.
    """
    raw = as_plain(raw)
    if not isinstance(raw, Mapping):
        return [raw]
    if raw.get("type") == "function_call_output":
        return [
            {"role": "tool", "call_id": raw.get("call_id"), "content": _text(raw.get("output"), "output")}
        ]
    if raw.get("type") == "message":
        raw = {k: v for k, v in raw.items() if k not in {"type", "id", "status"}}
    role = raw.get("role")
    if role == "tool" and "tool_call_id" in raw:
        out: dict[str, Any] = {"role": "tool", "call_id": raw["tool_call_id"]}
        out["content"] = _text(raw.get("content"), "tool message")
        if raw.get("name") is not None:
            out["tool_name"] = raw["name"]
        out.update({k: raw[k] for k in ("is_error", "at", "meta") if k in raw})
        return [out]
    if role == "assistant":
        return [_assistant(raw)]
    if role == "user":
        return _user(raw)
    return [dict(raw)]
