"""How rendered tokens are counted: the texts of an event, counted events, and message sizes."""

from __future__ import annotations

from collections.abc import Callable

import msgspec
from contextledger.domain.content import InlineText, Text
from contextledger.domain.errors import ValidationError
from contextledger.domain.events import (
    AnyEvent,
    AssistantMessageAdded,
    SessionStarted,
    SummaryRecorded,
    ToolResultRecorded,
    UserMessageAdded,
)
from contextledger.domain.ports import TokenCounter
from contextledger.projections.card_state import MessageFacts
from contextledger.projections.context import RenderedContext, RenderedMessage, media_of
from contextledger.projections.media import media_tokens
from contextledger.projections.wire import (
    MESSAGE_OVERHEAD,
    REQUEST_OVERHEAD,
    TOOL_CALL_OVERHEAD,
    call_texts,
    tools_text,
)

__all__ = [
    "CountedEvent",
    "count_context",
    "count_message",
    "count_with",
    "counted_texts",
    "system_tokens",
    "tools_text",
]


class CountedEvent(msgspec.Struct, frozen=True, kw_only=True):
    """A logged event with the token counts of its texts, as ``evolve`` consumes it.

    ``tokens`` holds one count per text of ``counted_texts(event)``, in that order. ``position`` is the
    event's position; for a ``SummaryRecorded`` it is ``produced_at`` (the position after which the
    artifact is available). ``full_text`` carries the resolved text of a blob content when the
    projection asked for it (``Projector.needs_text``) so that it can truncate it. ``card``, when
    set, holds the card's facts of a user or assistant message's text (``assistant_facts`` or
    ``user_facts``, found by an earlier rebuild), which the fold then does not look for again.
    """

    position: int
    event: AnyEvent
    tokens: tuple[int, ...] = ()
    full_text: str | None = None
    card: MessageFacts | None = None


def counted_texts(event: AnyEvent) -> list[Text]:
    """Return the texts of an event whose token counts ``CountedEvent.tokens`` carries, in order.

    SessionStarted: system prompt, tools JSON as sent (``wire.tools_text``). UserMessageAdded /
    ToolResultRecorded / SummaryRecorded: content. AssistantMessageAdded: content (empty when
    None), then the two wire texts of each tool call (``wire.call_texts``: the call as sent and
    the structure of its result). Pins: nothing.
    """
    if isinstance(event, SessionStarted):
        return [InlineText(event.system_prompt), InlineText(tools_text(event.tools))]
    if isinstance(event, UserMessageAdded | ToolResultRecorded | SummaryRecorded):
        return [event.content]
    if isinstance(event, AssistantMessageAdded):
        texts: list[Text] = [event.content if event.content is not None else InlineText("")]
        for call in event.tool_calls:
            texts += [InlineText(t) for t in call_texts(call.id, call.name, call.arguments)]
        return texts
    return []


def _inline_only(text: Text) -> str:
    if isinstance(text, InlineText):
        return text.text
    raise ValidationError(f"blob {text.sha256[:12]} needs a resolver to be counted")


def count_with(
    counter: TokenCounter, position: int, event: AnyEvent, resolve: Callable[[Text], str] | None = None
) -> CountedEvent:
    """Count an event's texts with a plain counter (tests and small tools; adapters use the cache).

    Args:
        counter: The tokenizer port.
        position: The event's position (``produced_at`` for a summary).
        event: The event to count.
        resolve: Reads a blob's text; without it only inline texts can be counted.
    """
    reader = resolve or _inline_only
    texts = [reader(t) for t in counted_texts(event)]
    tokens = tuple(counter.count_many(texts)) if texts else ()
    return CountedEvent(position=position, event=event, tokens=tokens)


def system_tokens(system_text_tokens: int, system: str) -> int:
    """Return the fixed part of every request: the system message (if any) and ``REQUEST_OVERHEAD``."""
    return REQUEST_OVERHEAD + (system_text_tokens + MESSAGE_OVERHEAD if system else 0)


def count_message(message: RenderedMessage, counter: TokenCounter) -> int:
    """Recount a rendered message from its texts, exactly as the projection sized it."""
    total = MESSAGE_OVERHEAD + counter.count(message.text) + sum(media_tokens(p) for p in media_of(message))
    for call in message.tool_calls:
        total += TOOL_CALL_OVERHEAD + sum(counter.count_many(call_texts(call.id, call.name, call.arguments)))
    return total


def count_context(context: RenderedContext, counter: TokenCounter) -> int:
    """Recount a whole rendered context (system, tools, messages) from its texts."""
    system = system_tokens(counter.count(context.system), context.system)
    tools = counter.count(tools_text(context.tools)) if context.tools else 0
    return system + tools + sum(count_message(m, counter) for m in context.messages)
