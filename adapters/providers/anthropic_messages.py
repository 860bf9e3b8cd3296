"""Anthropic Messages for the agent loop: request arguments (signed thinking too) and ``Message`` replies."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from contextledger.adapters.formats.anthropic import anthropic_call_ids, to_anthropic
from contextledger.adapters.providers.common import count, mapping, reply_dict
from contextledger.application.agent.agent_types import ParsedReply, StoredReasoning, Usage, WirePayload
from contextledger.application.kernel.wire_shapes import (
    HOSTED_BLOCKS,
    HOSTED_ITEMS,
    THINKING_BLOCKS,
    ledger_messages,
)
from contextledger.domain.errors import InvalidMessageError
from contextledger.projections.context import RenderedContext

__all__ = ["AnthropicFormat", "messages_usage"]


def messages_usage(usage: Mapping[str, Any], model: str | None) -> Usage:
    """Return the usage of a Messages reply; ``input_tokens`` adds the cache reads and writes."""
    fresh = count(usage.get("input_tokens"))
    read = count(usage.get("cache_read_input_tokens"))
    written = count(usage.get("cache_creation_input_tokens"))
    return Usage(
        input_tokens=None if fresh is None else fresh + (read or 0) + (written or 0),
        cached_tokens=read,
        cache_write_tokens=written,
        output_tokens=count(usage.get("output_tokens")),
        model=model,
    )


class AnthropicFormat:
    """Messages: ``system``, ``messages`` and ``tools`` with cache breakpoints; ``Message`` replies.

    Extended thinking with tool use requires the signed ``thinking`` block of each assistant turn
    that called tools to come back unchanged: the ledger keeps the thinking and its signature, and
    the request puts the block first in those assistant messages of the current turn. Server tool
    blocks (``server_tool_use`` and its result) of the current turn go back after the thinking,
    before the text, as the reply gave them (a paused turn is continued with them).
    """

    wire_format = "anthropic"

    def payload(self, context: RenderedContext, reasoning: Mapping[int, StoredReasoning]) -> WirePayload:
        """Return ``to_anthropic(context)`` with the thinking blocks to send back, and the id map."""
        hosted = {
            index: [dict(b) for b in kept if isinstance(b, dict)]
            for index, thought in reasoning.items()
            if isinstance(kept := thought.meta.get(HOSTED_ITEMS), list)
        }
        arguments = to_anthropic(context, hosted)
        ids = anthropic_call_ids(context)
        extra = [
            json.dumps(b, ensure_ascii=False, separators=(",", ":")) for bs in hosted.values() for b in bs
        ]
        for index, thought in reasoning.items():
            if not ids.calls[index]:
                continue
            kept = thought.meta.get(THINKING_BLOCKS)
            if isinstance(kept, list):
                blocks = [dict(b) for b in kept if isinstance(b, dict)]
            elif thought.signature:
                blocks = [{"type": "thinking", "thinking": thought.text, "signature": thought.signature}]
            else:
                continue
            if _insert_before_turn(arguments["messages"], ids.calls[index][0], blocks):
                extra.extend(json.dumps(b, ensure_ascii=False, separators=(",", ":")) for b in blocks)
        return WirePayload(arguments=arguments, stored_ids=dict(ids.stored), extra_texts=tuple(extra))

    def parse_reply(self, response: object) -> ParsedReply:
        """Return the content blocks (text, thinking with signature, tool_use) and usage of a ``Message``."""
        data = reply_dict(response, "Messages")
        content = data.get("content")
        if not isinstance(content, list):
            msg = "a Messages reply must hold a content list"
            raise InvalidMessageError(msg)
        model = data.get("model") if isinstance(data.get("model"), str) else None
        (parsed,) = ledger_messages({"role": "assistant", "content": content})
        return ParsedReply(message=parsed, usage=messages_usage(mapping(data.get("usage")), model))


def _insert_before_turn(
    messages: list[dict[str, Any]], first_call: str, blocks: list[dict[str, Any]]
) -> bool:
    """Put ``blocks`` first in the assistant message whose first ``tool_use`` is ``first_call``."""
    for message in messages:
        content = message["content"]
        for at, existing in enumerate(content):
            if existing.get("type") == "tool_use" and existing.get("id") == first_call:
                start = at - 1 if at > 0 and content[at - 1].get("type") == "text" else at
                while start > 0 and content[start - 1].get("type") in HOSTED_BLOCKS:
                    start -= 1  # the turn's server tool blocks come after its thinking
                content[start:start] = blocks
                return True
    return False
