"""LangChain messages in and out of the OpenAI Responses wire (``ChatOpenAI(use_responses_api=True)``).

``ChatOpenAI`` turns an ``AIMessage`` whose content holds Responses items (``reasoning``,
``function_call``) into those items unchanged, and a ``text`` block into an assistant ``message``
item; so the rendered context goes back as such messages, reasoning items with their
``encrypted_content`` included, and the instructions as the ``instructions`` model setting.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage

__all__ = ["from_responses", "responses_reply", "uses_responses"]

_MODEL_ITEMS = frozenset({"reasoning", "function_call"})


def uses_responses(model: object) -> bool:
    """Whether a LangChain chat model calls the OpenAI Responses API (``use_responses_api=True``)."""
    return getattr(model, "use_responses_api", None) is True


def _arguments(text: object) -> dict[str, Any]:
    try:
        value = json.loads(str(text))
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _ai_message(items: Sequence[Mapping[str, Any]]) -> AIMessage:
    """One assistant turn: reasoning and function call items kept as content blocks, text as text."""
    blocks: list[str | dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for item in items:
        if item.get("type") in _MODEL_ITEMS:
            blocks.append(dict(item))
        else:
            content = item.get("content")
            blocks.append({"type": "text", "text": content if isinstance(content, str) else ""})
        if item.get("type") == "function_call":
            call = {"id": item["call_id"], "name": item["name"], "args": _arguments(item.get("arguments"))}
            calls.append(call | {"type": "tool_call"})
    return AIMessage(content=blocks, tool_calls=calls, response_metadata={"model_provider": "openai"})


def from_responses(arguments: Mapping[str, Any]) -> tuple[list[AnyMessage], dict[str, Any]]:
    """The rendered Responses request as LangChain messages and model settings (``instructions``)."""
    out: list[AnyMessage] = []
    turn: list[Mapping[str, Any]] = []
    for item in arguments["input"]:
        if item.get("type") in _MODEL_ITEMS or item.get("role") == "assistant":
            turn.append(item)
            continue
        if turn:
            out.append(_ai_message(turn))
            turn = []
        if item.get("type") == "function_call_output":
            out.append(ToolMessage(content=item.get("output", ""), tool_call_id=item["call_id"]))
        else:
            out.append(HumanMessage(content=item.get("content", "")))
    if turn:
        out.append(_ai_message(turn))
    settings = {"instructions": arguments["instructions"]} if arguments.get("instructions") else {}
    return out, settings


def responses_reply(message: AIMessage) -> dict[str, Any]:
    """A ``ChatOpenAI`` Responses reply as a ``Response`` dict: its output items and usage."""
    output: list[dict[str, Any]] = []
    blocks = message.content if isinstance(message.content, list) else [message.content]
    for block in blocks:
        if isinstance(block, str):
            if block:
                output.append(_text_item(block))
        elif block.get("type") in _MODEL_ITEMS:
            output.append({k: v for k, v in block.items() if k not in {"index", "sub_index"}})
        elif block.get("type") in {"text", "output_text"} and block.get("text"):
            output.append(_text_item(str(block["text"])))
    sent = {item.get("call_id") for item in output if item.get("type") == "function_call"}
    output.extend(
        {"type": "function_call", "call_id": c["id"], "name": c["name"], "arguments": json.dumps(c["args"])}
        for c in message.tool_calls
        if c["id"] not in sent
    )
    out: dict[str, Any] = {"output": output}
    model = message.response_metadata.get("model_name") or message.response_metadata.get("model")
    if isinstance(model, str):
        out["model"] = model
    usage = message.usage_metadata
    if usage is not None:
        details = usage.get("input_token_details") or {}
        out["usage"] = {
            "input_tokens": usage["input_tokens"],
            "input_tokens_details": {"cached_tokens": details.get("cache_read") or 0},
            "output_tokens": usage["output_tokens"],
        }
    return out


def _text_item(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
