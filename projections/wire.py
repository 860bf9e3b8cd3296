"""What a request costs on the wire: the texts and overheads the projection counts for each part."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import msgspec
from contextledger.domain.events import ToolSchema

__all__ = [
    "MESSAGE_OVERHEAD",
    "REQUEST_OVERHEAD",
    "TOOL_CALL_OVERHEAD",
    "call_texts",
    "object_schema",
    "tools_text",
]

MESSAGE_OVERHEAD = 9
"""Tokens counted per message on top of its text, the larger of the two wire formats (cl100k).

OpenAI (cookbook accounting): 3 per message plus the role (1). Anthropic: the same 4 per message
plus the structure of its content block, ``{"type":"text"}`` (5). Text is counted as text.
"""

TOOL_CALL_OVERHEAD = 8
"""Tokens counted per tool call on top of ``call_texts``: what the Anthropic form of a call and its
result can take beyond them (``{"_raw_arguments": ...}`` wrapping of arguments that are not a JSON
object, 5; ``"is_error":true`` on the result, 5, or its ``[error: ...]`` text when blank).
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


def tools_text(tools: Sequence[ToolSchema]) -> str:
    """Return the JSON text of the tools as Chat Completions receives them (the larger wire form).

    ``[{"type": "function", "function": {name, description?, parameters}}]`` with the schema made
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
        wire.append({"type": "function", "function": function})
    return msgspec.json.encode(wire).decode()


def call_texts(call_id: str, name: str, arguments: str) -> tuple[str, str]:
    """Return the two texts a tool call and its result send besides the result's content.

    The first is the call as Chat Completions receives it, ``{"id", "type": "function",
    "function": {"name", "arguments"}}`` with the arguments JSON-escaped as sent (the Anthropic
    ``tool_use`` block, with the arguments as an object, is not longer). The second is the
    structure of the result that echoes the id, ``{"type":"tool_result","tool_use_id"}`` (the
    OpenAI ``tool_call_id`` is shorter). A call is always sent with its result or a placeholder
    (step groups are atomic), so both are charged to the call.
    """
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
    result = {"type": "tool_result", "tool_use_id": call_id}
    return msgspec.json.encode(call).decode(), msgspec.json.encode(result).decode()
