"""OpenAI Responses for the agent loop: request arguments (reasoning items too) and ``Response`` replies."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from contextledger.adapters.formats.anthropic import anthropic_call_ids
from contextledger.adapters.formats.openai_responses import to_openai_responses
from contextledger.adapters.providers.common import count, mapping, part_text, reply_dict
from contextledger.application.agent.agent_types import (
    ParsedReply,
    StoredReasoning,
    Usage,
    WirePayload,
)
from contextledger.application.kernel.wire_shapes import HOSTED_ITEMS, ledger_tool_call
from contextledger.domain.errors import InvalidMessageError
from contextledger.projections.context import RenderedContext
from contextledger.projections.reasoning_back import REASONING_RULES

__all__ = ["HOSTED_RESPONSE_ITEMS", "LEAD_ITEMS", "REASONING_ITEM_ID", "ResponsesFormat", "responses_usage"]

REASONING_ITEM_ID = "reasoning_item_id"
"""Key of an assistant event's ``meta`` that keeps the id of its Responses ``reasoning`` item."""
LEAD_ITEMS = "lead_items"
"""Key of an assistant event's ``meta``: in order, every reasoning and hosted tool item of a reply with
several reasoning items (reasoning, a web search, reasoning again), each sent back before the next item."""


HOSTED_RESPONSE_ITEMS = frozenset(
    {
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
    }
)
"""Output items of tools OpenAI runs itself (the caller runs none of them and answers none)."""


def responses_usage(usage: Mapping[str, Any], model: str | None) -> Usage:
    """Return the usage of a Responses reply (``input_tokens`` include the cached ones)."""
    return Usage(
        input_tokens=count(usage.get("input_tokens")),
        cached_tokens=count(mapping(usage.get("input_tokens_details")).get("cached_tokens")),
        output_tokens=count(usage.get("output_tokens")),
        model=model,
    )


class ResponsesFormat:
    """Responses (the OpenAI Agents SDK's API): ``instructions``, ``input`` items, function ``tools``.

    A reasoning item that came with ``encrypted_content`` (requested with ``include:
    ["reasoning.encrypted_content"]``) is kept and sent back before the calls it led to in the
    current tool-use turn, as stateless (``store: false``) use requires, followed by the items of
    tools OpenAI ran in that reply (a reasoning item must come with the item that followed it).
    """

    wire_format = "openai-responses"

    def payload(self, context: RenderedContext, reasoning: Mapping[int, StoredReasoning]) -> WirePayload:
        """Return ``to_openai_responses(context)`` with the reasoning and hosted items, and the id map."""
        items: dict[int, list[dict[str, Any]]] = {}
        for index, thought in reasoning.items():
            item_id = thought.meta.get(REASONING_ITEM_ID)
            lead = items[index] = []
            kept = thought.meta.get(LEAD_ITEMS)
            if isinstance(kept, list):  # several reasoning items, in the reply's order with the hosted ones
                lead.extend(dict(i) for i in kept if isinstance(i, dict))
                continue
            if isinstance(item_id, str) and thought.signature:
                lead.append(
                    {
                        "type": "reasoning",
                        "id": item_id,
                        # no summary asked for: an empty list as the reply had it (rules 1 sent an empty part)
                        "summary": [{"type": "summary_text", "text": thought.text}]
                        if thought.text or thought.rules < REASONING_RULES
                        else [],
                        "encrypted_content": thought.signature,
                    }
                )
            hosted = thought.meta.get(HOSTED_ITEMS)
            if isinstance(hosted, list):
                lead.extend(dict(i) for i in hosted if isinstance(i, dict))
        extra = tuple(
            json.dumps(i, ensure_ascii=False, separators=(",", ":")) for lead in items.values() for i in lead
        )
        ids = anthropic_call_ids(context)
        arguments = to_openai_responses(context, items)
        return WirePayload(arguments=arguments, stored_ids=dict(ids.stored), extra_texts=extra)

    def parse_reply(self, response: object) -> ParsedReply:
        """Return the output items (message text, reasoning, function calls) and usage of a ``Response``.

        Items of tools the provider ran (``web_search_call``, ``file_search_call``, ``mcp_call``,
        ``mcp_list_tools``...) are kept exactly, in order, in ``meta[HOSTED_ITEMS]``.
        """
        data = reply_dict(response, "Responses")
        output = data.get("output")
        if not isinstance(output, list):
            msg = "a Responses reply must hold an output list"
            raise InvalidMessageError(msg)
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        hosted: list[dict[str, Any]] = []
        lead: list[dict[str, Any]] = []  # reasoning and hosted items in order (kept when several reason)
        thoughts: list[str] = []
        message: dict[str, Any] = {"role": "assistant"}
        for item in (i for i in output if isinstance(i, dict)):
            kind = item.get("type")
            if kind == "message":
                texts.extend(part_text(p) for p in item.get("content") or () if isinstance(p, dict))
            elif kind == "function_call":
                calls.append(ledger_tool_call(item))
            elif kind == "reasoning":
                summary = [str(p.get("text", "")) for p in item.get("summary") or () if isinstance(p, dict)]
                message["reasoning"] = "\n\n".join(summary) or None
                thoughts.extend(t for t in summary if t)
                if isinstance(item.get("encrypted_content"), str) and isinstance(item.get("id"), str):
                    message["reasoning_signature"] = item["encrypted_content"]
                    message["meta"] = {REASONING_ITEM_ID: item["id"]}
                    lead.append(_reasoning_item(item))
            elif kind in HOSTED_RESPONSE_ITEMS:
                hosted.append(item)
                lead.append(item)
        if hosted:
            message["meta"] = {**message.get("meta", {}), HOSTED_ITEMS: hosted}
        if sum(i.get("type") == "reasoning" for i in lead) > 1:
            message["meta"] = {**message.get("meta", {}), LEAD_ITEMS: lead}
            message["reasoning"] = "\n\n".join(thoughts) or None
        message["content"] = "".join(texts) or None
        message["tool_calls"] = calls
        model = data.get("model") if isinstance(data.get("model"), str) else None
        return ParsedReply(message=message, usage=responses_usage(mapping(data.get("usage")), model))


def _reasoning_item(item: dict[str, Any]) -> dict[str, Any]:
    """A reasoning item as it goes back: its id, its summary parts as given, its encrypted content."""
    summary = [dict(p) for p in item.get("summary") or () if isinstance(p, dict)]
    return {
        "type": "reasoning",
        "id": item["id"],
        "summary": summary,
        "encrypted_content": item["encrypted_content"],
    }
