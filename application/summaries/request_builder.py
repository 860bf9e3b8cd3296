"""What a summarizer reads for one compaction request: the new events of the span, or its batches."""

from __future__ import annotations

from contextledger.application.kernel.ledger import Ledger
from contextledger.application.kernel.summary_log import SummaryStream
from contextledger.application.render.renderer import Renderer
from contextledger.application.summaries.card_check import card_for_summary, card_state_at
from contextledger.domain.content import BlobText, InlineText
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
from contextledger.projections.summary_requests import SpanEntry, SummaryRequest

__all__ = ["RequestBuilder"]

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
        it, live prefix or not, so a model summary cannot contradict it.
        """
        if request.depth > 0:  # clip-archive: fold the batches of the span into one, a level deeper
            entries = self._batches(session_id, request)
        else:
            first_new = previous.covers_through + 1 if previous is not None else request.covers_from
            events = self.ledger.events(session_id, after=first_new - 1, upto=request.covers_through)
            entries = tuple(e for e in (self._entry(r.position, r.event) for r in events) if e is not None)
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
            entries=entries,
            previous=self.ledger.text(previous.content) if previous is not None else None,
            max_tokens=limit,
            prefix=prefix,
            card=card_for_summary(
                card if card is not None else card_state_at(self.ledger, session_id, request.planned_at),
                request.planned_at,
                self.renderer.counter,
            ),
        )

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
