"""OpenAI Agents SDK items in and out of each wire: Responses (reasoning items kept) or Chat Completions."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from contextledger.adapters.providers.common import part_text
from contextledger.adapters.providers.openai_chat import OpenAIChatFormat
from contextledger.adapters.providers.openai_responses import ResponsesFormat
from contextledger.application.agent.agent_types import (
    ProviderFormat,
)

__all__ = [
    "ITEM_KEYS",
    "is_model_item",
    "item_key",
    "model_input",
    "provider_of",
    "reply_of",
    "tool_output_text",
]

ITEM_KEYS = "agents_items"
"""Key of a ledger message's ``meta`` listing the keys of the Agents SDK items it records, in order."""

_MODEL_ITEM_TYPES = frozenset({"reasoning", "function_call"})


def provider_of(model: object) -> ProviderFormat:
    """The wire of the agent's model: Chat Completions for ``OpenAIChatCompletionsModel``, else Responses."""
    if type(model).__name__ == "OpenAIChatCompletionsModel":
        return OpenAIChatFormat()
    return ResponsesFormat()


def _canonical(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)


def item_key(item: Mapping[str, Any]) -> str:
    """The identity of an SDK item across the inputs of a run and of later runs.

    A model's items are known by the ids the provider gave them (a function call by its
    ``call_id``, its output by the same id, a reasoning or message item by its ``id``); an item
    without an id (what the user said) by a hash of its JSON.
    """
    kind = item.get("type")
    if kind == "function_call" and isinstance(item.get("call_id"), str):
        return f"call:{item['call_id']}"
    if kind == "function_call_output" and isinstance(item.get("call_id"), str):
        return f"out:{item['call_id']}"
    if isinstance(item.get("id"), str) and item["id"]:
        return f"id:{item['id']}"
    digest = hashlib.sha256(_canonical(item).encode("utf-8", "surrogatepass")).hexdigest()[:24]
    return f"h:{digest}"


def is_model_item(item: Mapping[str, Any]) -> bool:
    """Whether the item is the model's (its reply: reasoning, text, calls), not the user's or a tool's."""
    return item.get("type") in _MODEL_ITEM_TYPES or item.get("role") == "assistant"


def tool_output_text(output: object) -> str:
    """A ``function_call_output``'s output as the text the ledger keeps (structured output as JSON)."""
    if isinstance(output, str):
        return output
    if isinstance(output, list) and all(isinstance(p, dict) and "text" in p for p in output):
        return "".join(str(p["text"]) for p in output)
    return _canonical(output)


def model_input(wire_format: str, arguments: Mapping[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
    """The rendered request as the SDK's model input: (input items, instructions).

    Responses arguments are already input items. Chat Completions messages become the items the
    SDK's Chat converter turns back into the same messages: the system message is the instructions,
    an assistant message is its text item then one ``function_call`` item per call, a tool message
    is a ``function_call_output``.
    """
    if wire_format == "openai-responses":
        return [dict(item) for item in arguments["input"]], arguments.get("instructions")
    instructions: str | None = None
    items: list[dict[str, Any]] = []
    for message in arguments["messages"]:
        role = message.get("role")
        if role == "system" and not items and instructions is None:
            instructions = message.get("content")
        elif role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message["tool_call_id"],
                    "output": message.get("content") or "",
                }
            )
        elif role == "assistant":
            if message.get("content"):
                items.append({"role": "assistant", "content": message["content"]})
            items.extend(
                {
                    "type": "function_call",
                    "call_id": call["id"],
                    "name": call["function"]["name"],
                    "arguments": call["function"]["arguments"],
                }
                for call in message.get("tool_calls") or ()
            )
        else:
            items.append({"role": role, "content": message.get("content")})
    return items, instructions


def _plain(item: object) -> dict[str, Any]:
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        plain = dump(mode="json", exclude_none=True)
        if isinstance(plain, dict):
            return plain
    return dict(item) if isinstance(item, Mapping) else {}


def reply_of(wire_format: str, output: Sequence[object], usage: object, model: str | None) -> dict[str, Any]:
    """An SDK ``ModelResponse`` (its output items and usage) as the wire's reply dict.

    Responses: the output items as they came (reasoning items with their ``encrypted_content``).
    Chat: one assistant message of the items' text, reasoning summary and calls.
    """
    items = [_plain(item) for item in output]
    details = getattr(usage, "input_tokens_details", None)
    cached = getattr(details, "cached_tokens", None)
    input_tokens, output_tokens = getattr(usage, "input_tokens", None), getattr(usage, "output_tokens", None)
    if not input_tokens and not output_tokens:  # the SDK's zeros: the provider gave no usage
        input_tokens = output_tokens = cached = None
    out: dict[str, Any] = {"model": model} if model else {}
    if wire_format == "openai-responses":
        out["output"] = items
        out["usage"] = {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": output_tokens,
        }
        return out
    texts = [
        part_text(part)
        for item in items
        if item.get("type") == "message"
        for part in item.get("content") or ()
        if isinstance(part, dict)
    ]
    thoughts = [
        str(part.get("text", ""))
        for item in items
        if item.get("type") == "reasoning"
        for part in item.get("summary") or ()
        if isinstance(part, dict)
    ]
    calls = [
        {"id": i["call_id"], "type": "function", "function": {"name": i["name"], "arguments": i["arguments"]}}
        for i in items
        if i.get("type") == "function_call"
    ]
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
    if calls:
        message["tool_calls"] = calls
    if thoughts:
        message["reasoning_content"] = "\n\n".join(thoughts)
    out["choices"] = [{"message": message}]
    out["usage"] = {
        "prompt_tokens": input_tokens,
        "completion_tokens": output_tokens,
        "prompt_tokens_details": {"cached_tokens": cached},
    }
    return out
