"""Types of the agent-loop API: a request to send, a tool call to run, usage, and the provider-format port."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol

import msgspec
from contextledger.domain.errors import InvalidMessageError
from contextledger.projections.context import RenderedContext
from contextledger.projections.reasoning_back import REASONING_RULES

__all__ = [
    "AgentRequest",
    "ParsedReply",
    "ProviderFormat",
    "StoredReasoning",
    "ToolCallRequest",
    "Usage",
    "WirePayload",
]


class Usage(msgspec.Struct, frozen=True, kw_only=True):
    """Tokens a provider reports for one call.

    ``input_tokens`` is every prompt token, cached ones included (OpenAI's ``prompt_tokens``;
    Anthropic's ``input_tokens + cache_read_input_tokens + cache_creation_input_tokens``).
    """

    input_tokens: int | None = None
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None
    output_tokens: int | None = None
    model: str | None = None


class StoredReasoning(msgspec.Struct, frozen=True, kw_only=True):
    """The reasoning an assistant event kept, with the provider's signature and the event's meta.

    ``rules`` are the ``REASONING_RULES`` of the request it goes back in: a wire sends it as they say.
    """

    text: str
    signature: str
    meta: dict[str, Any] = {}
    rules: int = REASONING_RULES


class WirePayload(msgspec.Struct, frozen=True, kw_only=True):
    """A provider's request arguments for a rendered context.

    ``stored_ids`` maps every tool-call id sent (or that the reply may name) back to the stored id;
    ``extra_texts`` are texts sent beyond the rendered context (signed reasoning), counted apart.
    """

    arguments: dict[str, Any]
    stored_ids: dict[str, str] = {}
    extra_texts: tuple[str, ...] = ()


class ParsedReply(msgspec.Struct, frozen=True, kw_only=True):
    """A model reply as a ledger-shaped assistant message dict, and its usage."""

    message: dict[str, Any]
    usage: Usage


class ProviderFormat(Protocol):
    """A provider's wire format: request arguments from a context, and its replies parsed back."""

    @property
    def wire_format(self) -> str:
        """The name recorded in the audit record (``openai``, ``anthropic``, ``openai-responses``)."""
        ...

    def payload(self, context: RenderedContext, reasoning: Mapping[int, StoredReasoning]) -> WirePayload:
        """Return the request arguments; ``reasoning``: signed reasoning to send back, by message index."""
        ...

    def parse_reply(self, response: object) -> ParsedReply:
        """Return the reply (an SDK object or its dict) as a ledger assistant message and usage."""
        ...


class AgentRequest(msgspec.Struct, frozen=True, kw_only=True):
    """What to send for the next model call: ``client.create(model=..., **request.arguments)``.

    ``call_id`` names the call's audit record; pass it back to ``record_response``.
    """

    call_id: str
    arguments: dict[str, Any]
    context: RenderedContext

    @property
    def tokens(self) -> int:
        """The rendered context's token count."""
        return self.context.tokens


_SHOWN = 80
"""How many characters of bad arguments an error shows."""


class ToolCallRequest(msgspec.Struct, frozen=True, kw_only=True):
    """A tool call the model issued, to run: ``id`` is the stored id to answer with ``record_tool_result``."""

    id: str
    name: str
    arguments: str

    @property
    def input(self) -> dict[str, Any]:
        """The arguments as an object (``{}`` for none: an empty text).

        Raises:
            InvalidMessageError: The arguments are not a JSON object, e.g. a reply cut by ``max_tokens``
                (``finish_reason`` ``length``) inside the call: running the tool with ``{}`` would run it
                with none of what the model asked for. Answer the call with an error result instead.
        """
        if not self.arguments.strip():
            return {}
        try:
            value = json.loads(self.arguments)
        except ValueError:
            value = None
        if not isinstance(value, dict):
            msg = (
                f"tool call {self.id!r} ({self.name}): its arguments are not a JSON object (a reply cut off "
                f"inside the call?), they begin {self.arguments[:_SHOWN]!r}; answer it with an error result"
            )
            raise InvalidMessageError(msg)
        return value
