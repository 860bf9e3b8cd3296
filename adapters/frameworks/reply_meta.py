"""A provider format whose parsed replies carry the adapter's ``meta`` (the framework's ids of the reply)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contextledger.application.agent.agent_types import (
    ParsedReply,
    ProviderFormat,
    StoredReasoning,
    WirePayload,
)
from contextledger.projections.context import RenderedContext

__all__ = ["ReplyMeta"]


class ReplyMeta:
    """``inner``'s wire, each parsed reply's message given ``meta`` (set just before it is recorded).

    A framework adapter knows a reply again by the ids it keeps in the stored message's ``meta``;
    the provider formats build that message themselves, so the adapter's keys are added here.
    """

    def __init__(self, inner: ProviderFormat) -> None:
        self.inner = inner
        self.meta: dict[str, Any] = {}

    @property
    def wire_format(self) -> str:
        """The inner format's."""
        return self.inner.wire_format

    def payload(self, context: RenderedContext, reasoning: Mapping[int, StoredReasoning]) -> WirePayload:
        """The inner format's payload."""
        return self.inner.payload(context, reasoning)

    def parse_reply(self, response: object) -> ParsedReply:
        """The inner format's reply, ``meta`` added to its message's."""
        reply = self.inner.parse_reply(response)
        meta = {**(reply.message.get("meta") or {}), **self.meta}
        return ParsedReply(message={**reply.message, "meta": meta}, usage=reply.usage)
