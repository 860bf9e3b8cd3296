"""The rendered context: a provider-neutral, token-counted list of messages with its provenance."""

from __future__ import annotations

import re
from typing import Literal

import msgspec
from contextledger.domain.content import MediaPart
from contextledger.domain.events import ToolSchema
from contextledger.projections.wire import MESSAGE_OVERHEAD, TOOL_CALL_OVERHEAD

__all__ = [
    "MESSAGE_OVERHEAD",
    "SHOWN_AS_SUMMARY",
    "TOOL_CALL_OVERHEAD",
    "Decision",
    "DecisionAction",
    "MediaMessage",
    "MessageKind",
    "RenderedContext",
    "RenderedMessage",
    "RenderedToolCall",
    "Role",
    "media_of",
]


Role = Literal["user", "assistant", "tool"]
MessageKind = Literal["message", "summary", "stub", "truncated", "injection", "card"]
DecisionAction = Literal["kept", "stubbed", "truncated", "summarized", "dropped", "pinned"]


class RenderedToolCall(msgspec.Struct, frozen=True, kw_only=True):
    """A tool call as it is sent: id, name, JSON arguments text."""

    id: str
    name: str
    arguments: str


class RenderedMessage(msgspec.Struct, frozen=True, kw_only=True, weakref=True):
    """One message of the history after the system prompt.

    ``sources`` are the log positions it was rendered from; ``kind`` says whether it is a message
    as logged, a summary block, a stubbed or truncated tool result, injected content, or the
    session-state card (``projections.card``).
    ``tokens`` is its counted size including ``MESSAGE_OVERHEAD`` and tool-call overheads.
    """

    role: Role
    text: str
    tokens: int
    kind: MessageKind = "message"
    sources: tuple[int, ...] = ()
    tool_calls: tuple[RenderedToolCall, ...] = ()
    tool_call_id: str | None = None
    tool_name: str | None = None
    is_error: bool = False


class MediaMessage(RenderedMessage, frozen=True, kw_only=True):
    """A rendered message with image or file parts, their data inline, counted in ``tokens``.

    A subclass, so that a message without parts encodes (and its context hashes) as before parts
    existed: the ``context_sha`` of calls recorded earlier still verifies.
    """

    media: tuple[MediaPart, ...] = ()


def media_of(message: RenderedMessage) -> tuple[MediaPart, ...]:
    """Return a rendered message's image and file parts (none for a plain message)."""
    return message.media if isinstance(message, MediaMessage) else ()


SHOWN_AS_SUMMARY = "shown as summary {summary_id} ({tokens:,} tokens)"
"""The detail of a ``summarized`` decision: the summary that stands for its span, as the render shows it."""
_SUMMARY_ID = re.compile(r"shown as summary (\S+) \(")


class Decision(msgspec.Struct, frozen=True, kw_only=True):
    """What happened to the logged events at positions ``first..last`` in this render, and by which rule.

    Ranges keep the list short (a render at 100k events must not list 100k decisions).
    """

    first: int
    last: int
    action: DecisionAction
    rule: str
    detail: str = ""

    @property
    def summary_id(self) -> str | None:
        """The summary a ``summarized`` decision names (``SHOWN_AS_SUMMARY``): clip-archive shows several."""
        if self.action != "summarized":
            return None
        found = _SUMMARY_ID.match(self.detail)
        return found.group(1) if found else None


class RenderedContext(msgspec.Struct, frozen=True, kw_only=True):
    """The context to send at ``position`` of a session under ``policy``.

    Layout (cache-prefix discipline): ``system`` and ``tools`` first, then ``messages`` whose first
    ``stable_prefix`` entries (pinned head, summary block) change only at compaction points, then the
    verbatim history, then injected content next to the last user message.
    ``tokens`` never exceeds ``budget`` and is at least what either wire payload costs, counted the
    way the providers count (see ``projections.wire``): ``system_tokens`` is the fixed part of every
    request (the system message, if any, and ``REQUEST_OVERHEAD``), ``tools_tokens`` the tools' JSON
    as sent, and each message's ``tokens`` its text, overheads and tool calls as sent.
    """

    session_id: str
    position: int
    policy: str
    tokenizer: str
    system: str
    system_tokens: int
    tools: tuple[ToolSchema, ...]
    tools_tokens: int
    messages: tuple[RenderedMessage, ...]
    stable_prefix: int
    tokens: int
    budget: int
    decisions: tuple[Decision, ...] = ()
    summary_id: str | None = None
