"""OpenAI Chat Completions for the agent loop: request arguments and ``ChatCompletion`` replies."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contextledger.adapters.formats.openai import openai_call_id, to_openai
from contextledger.adapters.providers.common import count, mapping, reply_dict
from contextledger.application.agent.agent_types import ParsedReply, StoredReasoning, Usage, WirePayload
from contextledger.application.kernel.wire_shapes import ledger_messages
from contextledger.domain.errors import InvalidMessageError
from contextledger.projections.context import RenderedContext

__all__ = ["OpenAIChatFormat", "chat_usage"]


def chat_usage(usage: Mapping[str, Any], model: str | None) -> Usage:
    """Return the usage of a Chat Completions reply (``prompt_tokens`` include the cached ones)."""
    details = mapping(usage.get("prompt_tokens_details"))
    return Usage(
        input_tokens=count(usage.get("prompt_tokens")),
        cached_tokens=count(details.get("cached_tokens")),
        output_tokens=count(usage.get("completion_tokens")),
        model=model,
    )


class OpenAIChatFormat:
    """Chat Completions: ``messages`` and ``tools``; replies as ``ChatCompletion`` objects or dicts.

    Chat Completions has no way to send reasoning back, so stored reasoning is not sent; a reply's
    ``reasoning_content`` (or ``reasoning``, as compatible servers name it) is kept in the ledger.
    """

    wire_format = "openai"

    def payload(self, context: RenderedContext, reasoning: Mapping[int, StoredReasoning]) -> WirePayload:
        """Return ``to_openai(context)`` and the map from the sent call ids back to the stored ones."""
        del reasoning
        stored = {
            openai_call_id(call.id): call.id for message in context.messages for call in message.tool_calls
        }
        return WirePayload(arguments=to_openai(context), stored_ids=stored)

    def parse_reply(self, response: object) -> ParsedReply:
        """Return the first choice's message and the usage of a ``ChatCompletion`` (object or dict)."""
        data = reply_dict(response, "Chat Completions")
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            msg = "a Chat Completions reply must hold at least one choice"
            raise InvalidMessageError(msg)
        message = mapping(choices[0].get("message"))
        model = data.get("model") if isinstance(data.get("model"), str) else None
        (parsed,) = ledger_messages({**message, "role": "assistant"})
        return ParsedReply(message=parsed, usage=chat_usage(mapping(data.get("usage")), model))
