"""LangChain messages in and out of each provider's wire: the model in use decides Chat or Messages."""

from __future__ import annotations

from typing import Any

from contextledger.adapters.frameworks.langchain_responses import responses_reply, uses_responses
from contextledger.adapters.providers.anthropic_messages import AnthropicFormat
from contextledger.adapters.providers.openai_chat import OpenAIChatFormat
from contextledger.adapters.providers.openai_responses import ResponsesFormat
from contextledger.application.agent.agent_types import ProviderFormat
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
    convert_to_openai_messages,
)

__all__ = ["LANGCHAIN_ID", "from_wire", "provider_of", "reply_of"]

LANGCHAIN_ID = "langchain_id"
"""Key of a ledger message's ``meta`` naming the LangChain message it records (its ``id``)."""


def provider_of(model: object) -> ProviderFormat:
    """The chat model's wire: Messages for ``ChatAnthropic``, Responses if it uses them, else Chat."""
    llm_type = str(getattr(model, "_llm_type", ""))
    if "anthropic" in llm_type or type(model).__name__ == "ChatAnthropic":
        return AnthropicFormat()
    if uses_responses(model):
        return ResponsesFormat()
    return OpenAIChatFormat()


def from_wire(wire_format: str, arguments: dict[str, Any]) -> tuple[SystemMessage | None, list[AnyMessage]]:
    """The rendered request as LangChain messages that the provider's integration sends back unchanged."""
    if wire_format == "anthropic":
        return _from_messages(arguments)
    messages: list[AnyMessage] = list(convert_to_messages(arguments["messages"]))  # type: ignore[arg-type]
    if messages and isinstance(messages[0], SystemMessage):
        return messages[0], messages[1:]
    return None, messages


def _from_messages(arguments: dict[str, Any]) -> tuple[SystemMessage | None, list[AnyMessage]]:
    system = arguments.get("system")
    out: list[AnyMessage] = []
    for message in arguments["messages"]:
        content = message["content"]
        if message["role"] == "assistant":
            blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
            calls = [
                {"id": b["id"], "name": b["name"], "args": b["input"], "type": "tool_call"}
                for b in blocks
                if b.get("type") == "tool_use"
            ]
            meta = {"model_provider": "anthropic"}
            out.append(AIMessage(content=blocks, tool_calls=calls, response_metadata=meta))
            continue
        if isinstance(content, str):
            out.append(HumanMessage(content=content))
            continue
        rest = [b for b in content if b.get("type") != "tool_result"]
        for block in (b for b in content if b.get("type") == "tool_result"):
            # a list of tool_result blocks is sent by ChatAnthropic as is (cache_control kept)
            status = "error" if block.get("is_error") else "success"
            out.append(ToolMessage(content=[dict(block)], tool_call_id=block["tool_use_id"], status=status))
        if rest:
            out.append(HumanMessage(content=rest))
    return (SystemMessage(content=system) if system else None), out


def reply_of(wire_format: str, message: AIMessage) -> dict[str, Any]:
    """A LangChain reply as the wire's reply dict (what the provider format parses), usage included."""
    model = message.response_metadata.get("model_name") or message.response_metadata.get("model")
    usage = message.usage_metadata
    out: dict[str, Any] = {"model": model} if isinstance(model, str) else {}
    if wire_format == "openai-responses":
        return responses_reply(message)
    if wire_format == "anthropic":
        blocks = (
            [dict(b) for b in message.content if isinstance(b, dict)]
            if isinstance(message.content, list)
            else ([{"type": "text", "text": message.content}] if message.content else [])
        )
        used = {b.get("id") for b in blocks if b.get("type") == "tool_use"}
        blocks += [
            {"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["args"]}
            for c in message.tool_calls
            if c["id"] not in used
        ]
        out["content"] = [{k: v for k, v in b.items() if k != "index"} for b in blocks]
        if usage is not None:
            details = usage.get("input_token_details") or {}
            read, written = details.get("cache_read") or 0, details.get("cache_creation") or 0
            out["usage"] = {
                "input_tokens": usage["input_tokens"] - read - written,
                "cache_read_input_tokens": read,
                "cache_creation_input_tokens": written,
                "output_tokens": usage["output_tokens"],
            }
        return out
    wire = convert_to_openai_messages(message)
    wire = {k: v for k, v in wire.items() if k not in {"name", "id"}}
    if not wire.get("content"):
        wire["content"] = None
    wire["meta"] = {LANGCHAIN_ID: message.id}
    out["choices"] = [{"message": wire}]
    if usage is not None:
        details = usage.get("input_token_details") or {}
        out["usage"] = {
            "prompt_tokens": usage.get("input_tokens"),
            "completion_tokens": usage.get("output_tokens"),
            "prompt_tokens_details": {"cached_tokens": details.get("cache_read")},
        }
    return out
