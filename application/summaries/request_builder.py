"""What a summarizer reads for one compaction request: the new events of the span, or its batches."""

from __future__ import annotations

import msgspec
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.kernel.summary_log import SummaryStream
from contextledger.application.render.renderer import Renderer
from contextledger.application.summaries.card_check import card_for_summary, card_state_at
from contextledger.domain.content import BlobText, InlineText
from contextledger.domain.errors import SummaryInputTooLargeError
from contextledger.domain.events import (
    AssistantMessageAdded,
    CompactionRequested,
    SummaryRecorded,
    ToolResultRecorded,
    UserMessageAdded,
)
from contextledger.projections.card_state import CardState
from contextledger.projections.context import RenderedContext
from contextledger.projections.policy import Policy
from contextledger.projections.summary_requests import SpanEntry, SummaryRequest, entry_lines, summary_prompt
from contextledger.projections.wire import MESSAGE_OVERHEAD

__all__ = ["MIN_ENTRY_CHARS", "RequestBuilder"]

MIN_ENTRY_CHARS = 256
"""The least a message of the span is clipped to when a call is held to its window (``parts``)."""

_READ_FACTOR = 64
"""Blobs longer than this many times ``entry_chars`` are represented by their stored preview."""


def _clipped(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[… {len(text) - limit:,} characters omitted …]\n{text[-half:]}"


class RequestBuilder:
    """Builds the ``SummaryRequest`` of a compaction request from the log (the worker's reading side).

    Args:
        ledger: The ledger whose events and artifacts are read.
        renderer: Renders the live prefix a model summarizer sends first (cache reads).
        config_sha: The summarizer's config; a clip-archive fold reads only its own batches.
        entry_chars: Each event's text is clipped to this many characters (head and tail kept).
    """

    def __init__(self, ledger: Ledger, renderer: Renderer, config_sha: str, entry_chars: int) -> None:
        self.ledger = ledger
        self.renderer = renderer
        self.config_sha = config_sha
        self.entry_chars = entry_chars

    def build(
        self,
        session_id: str,
        request: CompactionRequested,
        previous: SummaryRecorded | None,
        policy: Policy | None,
        limit: int,
        *,
        card: CardState | None = None,
    ) -> SummaryRequest:
        """Build what the summarizer reads: only the events the previous round did not cover.

        The session-state card at the request's point (``card``, else read from the log) goes with
        it, live prefix or not, so a model summary cannot contradict it. A model summarizer's
        request is then held to its window by ``parts``.
        """
        prefix: RenderedContext | None = None
        if policy is not None:
            prefix = self.renderer.render(
                session_id, policy, at=request.planned_at, budget=request.budget or None
            )
        return SummaryRequest(
            session_id=session_id,
            covers_from=request.covers_from,
            covers_through=request.covers_through,
            round=request.round,
            depth=request.depth,
            original_task=self._original_task(session_id),
            entries=self._entries(session_id, request, previous),
            previous=self.ledger.text(previous.content) if previous is not None else None,
            max_tokens=limit,
            prefix=prefix,
            card=card_for_summary(
                card if card is not None else card_state_at(self.ledger, session_id, request.planned_at),
                request.planned_at,
                self.renderer.counter,
            ),
        )

    def window(self, policy: Policy, request: CompactionRequested) -> int:
        """The tokens a model summarizer's call may send: the ``prompt_limit`` of the request's budget."""
        return self.renderer.projector(policy, budget=request.budget or None).budget.prompt_limit

    def parts(self, built: SummaryRequest, window: int) -> list[SummaryRequest]:
        """Split a model summarizer's request into calls of at most ``window`` tokens, summarized in a chain.

        A request sends the live prefix (the context, up to the budget) and then the span to summarize,
        each message up to ``entry_chars``: together they can exceed the model's window many times
        over, and a compaction that fails for the very reason it was asked for never ends (peers'
        compactions failed at 258k of 258k). Over the window, the prefix is left out first (it saves
        cache reads, nothing more). Still over, the span is cut into runs of whole messages in log
        order; each run is sent with the summary of the runs before it as the previous round's (the
        caller chains them: ``summary_worker``), so every call fits, and the last call's summary
        covers the whole span. A message too large for a call of its own is clipped further (head and
        tail kept), down to ``MIN_ENTRY_CHARS``.

        Raises:
            SummaryInputTooLargeError: the instruction, the task, the card, the previous summary and
                one message clipped to ``MIN_ENTRY_CHARS`` do not fit in one call.
        """
        if self.request_tokens(built) <= window:
            return [built]
        alone = msgspec.structs.replace(built, prefix=None)
        if self.request_tokens(alone) <= window:
            return [alone]
        # A later call's previous summary is an earlier call's answer: at most max_tokens tokens.
        previous = max(self.renderer.counter.count(built.previous or ""), built.max_tokens)
        room = (
            window - self.request_tokens(msgspec.structs.replace(alone, entries=(), previous=None)) - previous
        )
        runs: list[list[SpanEntry]] = [[]]
        used = 0
        for entry in built.entries:
            fitted, cost = self._within(entry, room, built, window)
            if runs[-1] and used + cost > room:
                runs.append([])
                used = 0
            runs[-1].append(fitted)
            used += cost
        return [
            msgspec.structs.replace(alone, entries=tuple(run), previous=built.previous if i == 0 else None)
            for i, run in enumerate(runs)
        ]

    def _within(
        self, entry: SpanEntry, room: int, built: SummaryRequest, window: int
    ) -> tuple[SpanEntry, int]:
        """``entry``, clipped to fit ``room`` tokens when it is larger, and what it takes of a call."""
        cost = self._entry_tokens(entry)
        chars = len(entry.text)
        while cost > room and chars > MIN_ENTRY_CHARS:
            chars = max(MIN_ENTRY_CHARS, chars // 2)
            entry = msgspec.structs.replace(entry, text=_clipped(entry.text, chars))
            cost = self._entry_tokens(entry)
        if cost > room:
            msg = (
                f"the summary request of positions {built.covers_from}-{built.covers_through} cannot be "
                f"sent in calls of {window:,} tokens: the instruction, task, card and previous summary "
                f"leave {max(room, 0):,}, and position {entry.position} takes {cost:,} clipped to "
                f"{chars:,} characters"
            )
            raise SummaryInputTooLargeError(msg)
        return entry, cost

    def _entry_tokens(self, entry: SpanEntry) -> int:
        """What one message adds to a summary prompt: its lines, counted, and a token per line break."""
        lines = entry_lines(entry)
        return self.renderer.counter.count("\n".join(lines)) + len(lines)

    def request_tokens(self, built: SummaryRequest) -> int:
        """Tokens a model summarizer sends for ``built``: the live prefix, then the instruction."""
        prefix = built.prefix.tokens if built.prefix is not None else 0
        return prefix + self.renderer.counter.count(summary_prompt(built)) + MESSAGE_OVERHEAD

    def _entries(
        self, session_id: str, request: CompactionRequested, previous: SummaryRecorded | None
    ) -> tuple[SpanEntry, ...]:
        """The span's entries: the events the previous round did not cover, or the batches of the span."""
        if request.depth > 0:  # clip-archive: fold the batches of the span into one, a level deeper
            return self._batches(session_id, request)
        first_new = previous.covers_through + 1 if previous is not None else request.covers_from
        events = self.ledger.events(session_id, after=first_new - 1, upto=request.covers_through)
        return tuple(e for e in (self._entry(r.position, r.event) for r in events) if e is not None)

    def _batches(self, session_id: str, request: CompactionRequested) -> tuple[SpanEntry, ...]:
        """The shallower batches inside the request's span, as summary entries in log order."""
        inside = [
            a
            for a in SummaryStream(self.ledger.log, session_id).artifacts()
            if request.covers_from <= a.covers_from
            and a.covers_through <= request.covers_through
            and a.depth < request.depth
            and a.config_sha == self.config_sha
            and not a.withheld
        ]
        inside.sort(key=lambda a: (a.covers_from, -a.depth))
        return tuple(
            SpanEntry(position=a.covers_through, role="summary", text=self.ledger.text(a.content))
            for a in inside
        )

    def _entry(self, position: int, event: object) -> SpanEntry | None:
        limit = self.entry_chars
        if isinstance(event, UserMessageAdded):
            return SpanEntry(
                position=position, role="user", text=_clipped(self.ledger.text(event.content), limit)
            )
        if isinstance(event, AssistantMessageAdded):
            text = _clipped(self.ledger.text(event.content), limit)
            return SpanEntry(position=position, role="assistant", text=text, tool_calls=event.tool_calls)
        if isinstance(event, ToolResultRecorded):
            text = _clipped(self._head_tail(event.content, limit), limit)
            return SpanEntry(
                position=position, role="tool", text=text, tool_name=event.tool_name, is_error=event.is_error
            )
        return None

    def _head_tail(self, content: InlineText | BlobText, limit: int) -> str:
        """The text of a result; a huge blob is not read at all (its preview stands for it)."""
        if isinstance(content, BlobText) and content.chars > limit * _READ_FACTOR:
            return f"{content.preview}\n[… {content.chars:,} characters in the log …]"
        return self.ledger.text(content)

    def _original_task(self, session_id: str) -> str:
        for recorded in self.ledger.events(session_id, upto=50):
            if isinstance(recorded.event, UserMessageAdded):
                return self.ledger.text(recorded.event.content)
        return ""
