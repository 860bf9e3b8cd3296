"""pydantic-ai messages in and out of each wire: Messages (thinking), Responses (reasoning), Chat."""

from __future__ import annotations

from typing import Any

from contextledger.adapters.frameworks.pydantic_ai_media import prompt_of
from contextledger.adapters.providers.anthropic_messages import AnthropicFormat
from contextledger.adapters.providers.openai_chat import OpenAIChatFormat
from contextledger.adapters.providers.openai_responses import ResponsesFormat
from contextledger.application.agent.agent_types import ProviderFormat
from contextledger.application.kernel.media_shapes import MEDIA_PARTS
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

__all__ = ["MARK", "from_wire", "provider_of", "reply_of"]

MARK = "contextledger"
"""Key of a pydantic-ai message's ``metadata`` saying it is recorded (an id) or rendered (``rendered:``)."""


def provider_of(model: object) -> ProviderFormat:
    """The wire of the model in use: Messages for Anthropic, Responses for OpenAI Responses, else Chat."""
    if type(model).__name__ == "OpenAIResponsesModel":
        return ResponsesFormat()
    if getattr(model, "system", None) == "anthropic":
        return AnthropicFormat()
    return OpenAIChatFormat()


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


class _Builder:
    """Collects request parts and responses in order, every message marked as rendered."""

    def __init__(self, mark: str, provider_name: str | None) -> None:
        self.mark = mark
        self.provider_name = provider_name
        self.out: list[ModelMessage] = []
        self.parts: list[ModelRequestPart] = []
        self.names: dict[str, str] = {}

    def request_part(self, part: ModelRequestPart) -> None:
        self.parts.append(part)

    def response(self, parts: list[ModelResponsePart]) -> None:
        if self.parts:
            self.out.append(ModelRequest(parts=self.parts, metadata={MARK: self.mark}))
            self.parts = []
        for part in parts:
            if isinstance(part, ToolCallPart):
                self.names[part.tool_call_id] = part.tool_name
        reply = ModelResponse(
            parts=parts or [TextPart(content="")],
            metadata={MARK: self.mark},
            provider_name=self.provider_name,
        )
        self.out.append(reply)

    def result(self, call_id: str, content: str) -> None:
        name = self.names.get(call_id, "tool")
        self.parts.append(ToolReturnPart(tool_name=name, content=content, tool_call_id=call_id))

    def done(self) -> list[ModelMessage]:
        if self.parts:
            self.out.append(ModelRequest(parts=self.parts, metadata={MARK: self.mark}))
        return self.out


def from_wire(wire_format: str, arguments: dict[str, Any], mark: str) -> list[ModelMessage]:
    """The rendered request as pydantic-ai messages (thinking and reasoning as ``ThinkingPart``s)."""
    names = {"anthropic": "anthropic", "openai-responses": "openai"}
    build = _Builder(mark, names.get(wire_format))  # replies "of" the provider: it takes their reasoning back
    if wire_format == "anthropic":
        system = arguments.get("system") or []
        if system:
            build.request_part(SystemPromptPart(content=_text(system)))
        for message in arguments["messages"]:
            _anthropic_message(build, message)
    elif wire_format == "openai-responses":
        if arguments.get("instructions"):
            build.request_part(SystemPromptPart(content=arguments["instructions"]))
        _responses_items(build, arguments["input"])
    else:
        for message in arguments["messages"]:
            _chat_message(build, message)
    return build.done()


def _anthropic_message(build: _Builder, message: dict[str, Any]) -> None:
    content = message["content"]
    blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
    if message["role"] == "assistant":
        parts: list[ModelResponsePart] = []
        for block in blocks:
            kind = block.get("type")
            if kind == "thinking":
                thought = ThinkingPart(
                    content=block["thinking"], signature=block["signature"], provider_name="anthropic"
                )
                parts.append(thought)
            elif kind == "text":
                parts.append(TextPart(content=block["text"]))
            elif kind == "tool_use":
                parts.append(
                    ToolCallPart(tool_name=block["name"], args=block["input"], tool_call_id=block["id"])
                )
        build.response(parts)
        return
    if any(block.get("type") in MEDIA_PARTS for block in blocks):
        results = [b for b in blocks if b.get("type") == "tool_result"]
        for block in results:
            build.result(block["tool_use_id"], _text(block.get("content")))
        rest = [b for b in blocks if b.get("type") != "tool_result"]
        build.request_part(UserPromptPart(content=prompt_of(rest, _text)))
        return
    for block in blocks:
        if block.get("type") == "tool_result":
            build.result(block["tool_use_id"], _text(block.get("content")))
        else:
            build.request_part(UserPromptPart(content=_text([block])))


def _responses_items(build: _Builder, items: list[dict[str, Any]]) -> None:
    pending: list[ModelResponsePart] = []
    for item in items:
        kind = item.get("type")
        if kind == "reasoning":
            summary = "\n\n".join(str(p.get("text", "")) for p in item.get("summary") or ())
            pending.append(
                ThinkingPart(
                    content=summary,
                    id=item["id"],
                    signature=item.get("encrypted_content"),
                    provider_name="openai",
                )
            )
        elif kind == "function_call":
            call = ToolCallPart(tool_name=item["name"], args=item["arguments"], tool_call_id=item["call_id"])
            pending.append(call)
        elif item.get("role") == "assistant":
            pending.append(TextPart(content=_text(item.get("content"))))
        else:
            if pending:
                build.response(pending)
                pending = []
            if kind == "function_call_output":
                build.result(item["call_id"], str(item.get("output", "")))
            else:
                content = item.get("content")
                parts = content if isinstance(content, list) else [{"type": "text", "text": content}]
                build.request_part(UserPromptPart(content=prompt_of(parts, _text)))
    if pending:
        build.response(pending)


def _chat_message(build: _Builder, message: dict[str, Any]) -> None:
    role = message.get("role")
    content = _text(message.get("content"))
    if role == "system":
        build.request_part(SystemPromptPart(content=content))
    elif role == "user" and isinstance(message.get("content"), list):
        build.request_part(UserPromptPart(content=prompt_of(message["content"], _text)))
    elif role == "user":
        build.request_part(UserPromptPart(content=content))
    elif role == "tool":
        build.result(str(message.get("tool_call_id")), content)
    elif role == "assistant":
        parts: list[ModelResponsePart] = [TextPart(content=content)] if content else []
        for call in message.get("tool_calls") or ():
            function = call["function"]
            parts.append(
                ToolCallPart(tool_name=function["name"], args=function["arguments"], tool_call_id=call["id"])
            )
        build.response(parts)


def reply_of(wire_format: str, message: ModelResponse, mark: str) -> dict[str, Any]:
    """A model reply as the wire's reply dict (what the provider format parses), usage included."""
    out: dict[str, Any] = {"model": message.model_name} if message.model_name else {}
    if wire_format == "anthropic":
        return out | _messages_reply(message)
    if wire_format == "openai-responses":
        return out | _responses_reply(message)
    return out | _chat_reply(message, mark)


def _messages_reply(message: ModelResponse) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, ThinkingPart) and part.signature:
            blocks.append({"type": "thinking", "thinking": part.content, "signature": part.signature})
        elif isinstance(part, TextPart) and part.content:
            blocks.append({"type": "text", "text": part.content})
        elif isinstance(part, ToolCallPart):
            use = {"type": "tool_use", "id": part.tool_call_id, "name": part.tool_name}
            blocks.append(use | {"input": part.args_as_dict()})
    usage = message.usage
    read, written = usage.cache_read_tokens, usage.cache_write_tokens
    return {
        "content": blocks,
        "usage": {
            "input_tokens": usage.input_tokens - read - written,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": written,
            "output_tokens": usage.output_tokens,
        },
    }


def _responses_reply(message: ModelResponse) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, ThinkingPart) and part.id:
            summary = [{"type": "summary_text", "text": part.content}] if part.content else []
            item: dict[str, Any] = {"type": "reasoning", "id": part.id, "summary": summary}
            if part.signature:
                item["encrypted_content"] = part.signature
            output.append(item)
        elif isinstance(part, TextPart) and part.content:
            text = [{"type": "output_text", "text": part.content}]
            output.append({"type": "message", "role": "assistant", "content": text})
        elif isinstance(part, ToolCallPart):
            call = {"type": "function_call", "call_id": part.tool_call_id, "name": part.tool_name}
            output.append(call | {"arguments": part.args_as_json_str()})
    usage = message.usage
    return {
        "output": output,
        "usage": {
            "input_tokens": usage.input_tokens,
            "input_tokens_details": {"cached_tokens": usage.cache_read_tokens},
            "output_tokens": usage.output_tokens,
        },
    }


def _chat_reply(message: ModelResponse, mark: str) -> dict[str, Any]:
    texts = [p.content for p in message.parts if isinstance(p, TextPart)]
    thoughts = [p.content for p in message.parts if isinstance(p, ThinkingPart) and p.content]
    calls = [
        {
            "id": p.tool_call_id,
            "type": "function",
            "function": {"name": p.tool_name, "arguments": p.args_as_json_str()},
        }
        for p in message.parts
        if isinstance(p, ToolCallPart)
    ]
    wire: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None, "meta": {MARK: mark}}
    if calls:
        wire["tool_calls"] = calls
    if thoughts:
        wire["reasoning_content"] = "\n\n".join(thoughts)
    usage = message.usage
    return {
        "choices": [{"message": wire}],
        "usage": {
            "prompt_tokens": usage.input_tokens,
            "completion_tokens": usage.output_tokens,
            "prompt_tokens_details": {"cached_tokens": usage.cache_read_tokens},
        },
    }
