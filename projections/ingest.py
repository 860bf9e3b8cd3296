"""Turning counted events into window entries: the per-message cap and precomputed short forms."""

from __future__ import annotations

from contextledger.domain.content import BlobText, InlineText, Text, text_preview
from contextledger.domain.events import AssistantMessageAdded, ToolResultRecorded, UserMessageAdded
from contextledger.domain.ports import TokenCounter
from contextledger.projections.budget import Budget
from contextledger.projections.context import MESSAGE_OVERHEAD, TOOL_CALL_OVERHEAD, RenderedToolCall
from contextledger.projections.counting import CountedEvent
from contextledger.projections.media import NOTE_MARGIN, media_note, media_tokens
from contextledger.projections.reducers.truncation import TruncationConfig, cut_tokens, shorten
from contextledger.projections.state import Entry

__all__ = ["PENDING_TEXT", "EntryBuilder"]

PENDING_TEXT = "[no result recorded yet]"
"""The placeholder result rendered for a tool call still waiting for its result (keeps the pair)."""


_EMPTY = InlineText("")
"""The content of an assistant message with none (frozen: one object serves every such entry)."""


class EntryBuilder:
    """Builds the entry of a message on arrival: capped to the per-message limit, short form ready.

    The cap (``Budget.message_cap``) applies at once, so no single message can exceed the budget;
    the short form (``TruncationConfig``) is only precomputed here and shown from the next
    compaction point on. Derived texts are counted through the ``TokenCounter`` port.
    """

    def __init__(self, budget: Budget, truncation: TruncationConfig, counter: TokenCounter) -> None:
        """Configure the cap, the short forms and the counter for derived texts."""
        self.budget = budget
        self.truncation = truncation
        self.counter = counter
        self._pending: int | None = None
        self._fits = budget.message_tokens - MESSAGE_OVERHEAD
        """Content tokens a message (its calls or media included) may have and enter whole (else ``_cut``)."""

    def needs_text(self, counted: CountedEvent) -> bool:
        """Return whether ``counted.full_text`` must carry the blob's text (to cap or shorten it)."""
        event = counted.event
        if not isinstance(event, UserMessageAdded | AssistantMessageAdded | ToolResultRecorded):
            return False
        if not isinstance(event.content, BlobText):
            return False
        over_cap = counted.tokens[0] + MESSAGE_OVERHEAD > self.budget.message_tokens
        if not isinstance(event, ToolResultRecorded) or not self.truncation.active:
            return over_cap
        max_tokens = self.truncation.max_tokens
        return (
            over_cap
            or self.truncation.max_lines is not None
            or (max_tokens is not None and counted.tokens[0] > max_tokens)
        )

    def user(self, counted: CountedEvent, event: UserMessageAdded) -> Entry:
        """Return the entry of a user message with its media parts.

        Parts count their estimate (``projections.media``); when the message and its parts exceed
        the per-message cap, the parts are evicted first, each leaving its stub after the text.
        """
        media = sum(media_tokens(part) for part in event.media) if event.media else 0
        note: str | None = None
        extra = media
        full = counted.tokens[0]
        if media and full + media > self._fits:
            note = media_note(event.media, counted.position)
            extra = self.counter.count(note) + NOTE_MARGIN
        text, tokens, rule = None, full, ""
        if full + extra > self._fits:
            text, tokens, rule = self._cut(counted, event.content, full, extra)
        return Entry(
            position=counted.position,
            role="user",
            tokens=tokens + extra + MESSAGE_OVERHEAD,
            kind="stub" if note else "message" if text is None else "truncated",
            content=event.content,
            text=text,
            full_tokens=full + media + MESSAGE_OVERHEAD,
            rule=("cap:media" if note else "") or rule,
            media=() if note else event.media,
            media_note=note,
        )

    def assistant(self, counted: CountedEvent, event: AssistantMessageAdded) -> Entry:
        """Return the entry of an assistant message with its tool calls."""
        counts = counted.tokens
        calls: tuple[RenderedToolCall, ...] = ()
        call_tokens = 0
        if calls_of := event.tool_calls:
            calls = tuple([RenderedToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in calls_of])
            call_tokens = TOOL_CALL_OVERHEAD * len(calls) + sum(counts[1 : 1 + 2 * len(calls)])
        content = event.content if event.content is not None else _EMPTY
        full = counts[0]
        text, tokens, rule = None, full, ""
        if full + call_tokens > self._fits:
            text, tokens, rule = self._cut(counted, content, full, call_tokens)
        return Entry(
            position=counted.position,
            role="assistant",
            tokens=tokens + call_tokens + MESSAGE_OVERHEAD,
            kind="message" if text is None else "truncated",
            content=content,
            text=text,
            tool_calls=calls,
            full_tokens=full + call_tokens + MESSAGE_OVERHEAD,
            rule=rule,
        )

    def result(self, counted: CountedEvent, event: ToolResultRecorded, *, head: bool) -> Entry:
        """Return the entry of a tool result (``head`` results get no short form)."""
        full = counted.tokens[0]
        text, tokens, rule = None, full, ""
        if full > self._fits:
            text, tokens, rule = self._cut(counted, event.content, full, 0)
        short_text: str | None = None
        short_tokens = 0
        if self.truncation.active and not head:
            source = text if text is not None else self._text(event.content, counted.full_text)
            if source is not None:
                short = shorten(
                    source,
                    self.truncation.max_lines,
                    self.truncation.max_tokens,
                    self.counter,
                    position=counted.position,
                    full=full,
                    tokens=tokens,
                )
                if short is not None and short[1] < tokens:
                    short_text, short_tokens = short
        return Entry(
            position=counted.position,
            role="tool",
            tokens=tokens + MESSAGE_OVERHEAD,
            kind="message" if text is None else "truncated",
            content=event.content,
            text=text,
            tool_call_id=event.call_id,
            tool_name=event.tool_name,
            is_error=event.is_error,
            full_tokens=full + MESSAGE_OVERHEAD,
            short_text=short_text,
            short_tokens=short_tokens,
            rule=rule,
        )

    def pending_tokens(self) -> int:
        """Return the rendered size of a pending-result placeholder (counted once: each session asks)."""
        if self._pending is None:
            self._pending = self.counter.count(PENDING_TEXT) + MESSAGE_OVERHEAD
        return self._pending

    @staticmethod
    def _text(content: Text, full_text: str | None) -> str | None:
        if isinstance(content, InlineText):
            return content.text
        return full_text

    def _cut(self, counted: CountedEvent, content: Text, tokens: int, extra: int) -> tuple[str, int, str]:
        """Return (the text cut to the per-message cap, its tokens, rule) of a message over ``_fits``.

        The callers call it only for ``tokens + extra > self._fits`` (a message that fits enters whole).
        """
        limit = max(self._fits - extra, 1)
        source = self._text(content, counted.full_text)
        known: int | None = tokens  # the text's own count: cut_tokens need not count (hash) it again
        if source is None:
            # The blob was not resolved: say what is missing instead of reading it here.
            missing = f"[... the rest of this text was not loaded; restore: seq {counted.position} ...]"
            source = f"{text_preview(content)}\n{missing}"
            known = None
        cut, count = cut_tokens(
            source, limit, self.counter, position=counted.position, full_tokens=tokens, known=known
        )
        return cut, count, "cap"
