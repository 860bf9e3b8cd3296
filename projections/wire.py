"""What a request costs on the wire: the texts and overheads the projection counts for each part."""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Sequence
from typing import Any

import msgspec
from contextledger.domain.events import ToolSchema

__all__ = [
    "ANTHROPIC_ID",
    "ANTHROPIC_MAX_CALL_ID",
    "MESSAGE_OVERHEAD",
    "OPENAI_MAX_CALL_ID",
    "RAW_ARGUMENTS_KEY",
    "REQUEST_OVERHEAD",
    "TOOL_CALL_OVERHEAD",
    "arguments_object",
    "call_texts",
    "object_schema",
    "rewrite_id",
    "tool_input",
    "tools_text",
]

OPENAI_MAX_CALL_ID = 40
"""The longest tool call id Chat Completions accepts ("string too long ... maximum length 40")."""

ANTHROPIC_MAX_CALL_ID = 128
"""Longest ``tool_use`` id sent as is (defensive; ids must also match ``ANTHROPIC_ID``)."""

ANTHROPIC_ID = re.compile(r"[A-Za-z0-9_-]+")
"""What a ``tool_use`` id must match, whole."""

RAW_ARGUMENTS_KEY = "_raw_arguments"
"""Key under which arguments that are not a JSON object are sent, verbatim, as ``tool_use`` input."""

MESSAGE_OVERHEAD = 9
"""Tokens counted per message on top of its text, the larger of the two wire formats (cl100k).

OpenAI (cookbook accounting): 3 per message plus the role (1). Anthropic: the same 4 per message
plus the structure of its content block, ``{"type":"text"}`` (5). Text is counted as text.
"""

TOOL_CALL_OVERHEAD = 8
"""Tokens counted per tool call on top of ``call_texts``, for what only the request shows: the
``[error: the tool returned no output]`` text of a blank error result (9, less the 5 its own
message leaves free) and the ``_<n>`` suffix a reused id gets in an Anthropic request (2 per id).
"""

REQUEST_OVERHEAD = 46
"""Tokens counted once per request: the reply primer (3), three Anthropic ``cache_control`` markers
(3 x 10) and the user placeholder put first when the history starts with an assistant message (13).
"""


def object_schema(parameters: dict[str, Any]) -> dict[str, Any]:
    """Return a copy of a tool's parameters schema as both APIs accept it: a ``type: object`` schema.

    An empty schema becomes ``{"type": "object", "properties": {}}``; a schema without ``type``
    gets ``"type": "object"`` first; any other schema is copied verbatim.

    Args:
        parameters: ``ToolSchema.parameters``.

    Returns:
        A deep copy, so that the payload shares nothing mutable with the frozen schema.
    """
    if not parameters:
        return {"type": "object", "properties": {}}
    schema = copy.deepcopy(parameters)
    return schema if "type" in schema else {"type": "object", **schema}


def rewrite_id(call_id: str, *, max_length: int, allowed: re.Pattern[str] | None = None) -> str:
    """Return ``call_id`` unchanged if the provider accepts it, else a deterministic accepted form.

    The rewritten form keeps the allowed characters (others become ``_``), cut so that an
    underscore and 8 hex digits of the SHA-256 of the original id fit in ``max_length``; the hash
    keeps distinct ids distinct. A call and its result go through the same function, so they stay
    paired.

    Args:
        call_id: The id as logged.
        max_length: The provider's maximum id length.
        allowed: A pattern the whole id must match (``fullmatch``), or None when any
            characters are accepted.

    Returns:
        An id no longer than ``max_length`` (and matching ``allowed``; a rewritten id always
        matches ``[A-Za-z0-9_-]+``).
    """
    if len(call_id) <= max_length and (allowed is None or allowed.fullmatch(call_id)):
        return call_id
    digest = hashlib.sha256(call_id.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    cleaned = re.sub(r"[^A-Za-z0-9_-]", "_", call_id)[: max_length - 9]
    return f"{cleaned}_{digest}"


def tool_input(arguments: str) -> dict[str, Any]:
    """Return the ``tool_use`` input for a call's arguments text; the API needs a JSON object.

    Blank arguments are the empty object. Text that is not a JSON object (invalid JSON, or an
    array, string or number) is wrapped as ``{"_raw_arguments": <the text, verbatim>}``: lossless,
    deterministic, and unlikely to collide with a real parameter name.

    Args:
        arguments: The JSON text the model produced.

    Returns:
        A fresh dict.
    """
    if not arguments.strip():
        return {}
    value = arguments_object(arguments)
    return {RAW_ARGUMENTS_KEY: arguments} if value is None else value


def arguments_object(arguments: str) -> dict[str, Any] | None:
    """Return the arguments as a JSON object, or None when they are not one."""
    try:
        value = msgspec.json.decode(arguments)
    except (msgspec.DecodeError, RecursionError):  # too deep to decode (stored before the depth limit)
        return None
    return value if isinstance(value, dict) else None


def tools_text(tools: Sequence[ToolSchema]) -> str:
    """Return the JSON text of the tools as Chat Completions receives them (the larger wire form).

    ``[{"type": "function", "function": {name, description?, parameters, strict?}}]`` with the schema made
    a ``type: object`` schema; the Anthropic form (``name, description?, input_schema``) is shorter.
    """
    if not tools:
        return ""
    wire = []
    for tool in tools:
        function: dict[str, Any] = {"name": tool.name}
        if tool.description:
            function["description"] = tool.description
        function["parameters"] = object_schema(tool.parameters)
        if isinstance(tool.strict, bool):
            function["strict"] = tool.strict
        wire.append({"type": "function", "function": function})
    return msgspec.json.encode(wire).decode()


def call_texts(call_id: str, name: str, arguments: str) -> tuple[str, str]:
    """Return the two texts a tool call and its result send besides the result's content.

    The first is the call as Chat Completions receives it, ``{"id", "type": "function",
    "function": {"name", "arguments"}}`` with the arguments JSON-escaped as sent (the Anthropic
    ``tool_use`` block, with the arguments as an object, is not longer). The second is what the
    Anthropic form adds: the structure of the result, ``{"type":"tool_result","tool_use_id",
    "is_error":true}`` (the OpenAI ``tool_call_id`` is shorter), the ``_raw_arguments`` wrapping
    of arguments that are not a JSON object, and the ``tool_use`` id again when it differs from
    the OpenAI one. A call is always sent with its result or a placeholder (step groups are
    atomic), so both are charged to the call.
    """
    openai_id = rewrite_id(call_id, max_length=OPENAI_MAX_CALL_ID)
    anthropic_id = rewrite_id(call_id, max_length=ANTHROPIC_MAX_CALL_ID, allowed=ANTHROPIC_ID)
    call = {"id": openai_id, "type": "function", "function": {"name": name, "arguments": arguments}}
    result = {"type": "tool_result", "tool_use_id": anthropic_id, "is_error": True}
    extra = msgspec.json.encode(result).decode()
    if arguments.strip() and arguments_object(arguments) is None:
        extra += msgspec.json.encode({RAW_ARGUMENTS_KEY: ""}).decode()
    if anthropic_id != openai_id:
        extra += f" {anthropic_id}"
    return msgspec.json.encode(call).decode(), extra
