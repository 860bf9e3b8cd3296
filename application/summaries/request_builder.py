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
    said_by_user,
)
from contextledger.projections.card_state import CardState
from contextledger.projections.context import RenderedContext
from contextledger.projections.counting import system_tokens
from contextledger.projections.policy import Policy
from contextledger.projections.summary_requests import (
    SUMMARY_SYSTEM,
    SpanEntry,
    SummaryRequest,
    clip_text,
    entry_lines,
    summary_prompt,
)
from contextledger.projections.wire import MESSAGE_OVERHEAD

__all__ = ["MIN_ENTRY_CHARS", "RequestBuilder"]

MIN_ENTRY_CHARS = 256
"""The least a message of the span is clipped to when a call is held to its window (``parts``)."""

_READ_FACTOR = 64
"""Blobs longer than this many times ``entry_chars`` are represented by their stored preview."""


def _clip_entry(entry: SpanEntry, chars: int) -> SpanEntry:
    """``entry`` with its text and each of its calls' arguments clipped to ``chars`` characters."""
    calls = tuple(
        msgspec.structs.replace(c, arguments=clip_text(c.arguments, chars)) for c in entry.tool_calls
    )
    return msgspec.structs.replace(entry, text=clip_text(entry.text, chars), tool_calls=calls)


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

    def window(self, policy: Policy, request: CompactionRequested, limit: int) -> int:
        """The tokens a model summarizer's call may send for an answer of ``limit`` tokens.

        The ``prompt_limit`` of the request's budget (the window less the output reserve and safety
        margin), and never more than the window less the answer: the agent's model's window (a
        summarizer model with a smaller window than the agent's is not known here).
        """
        budget = self.renderer.projector(policy, budget=request.budget or None).budget
        return min(budget.prompt_limit, budget.total - limit)

    def parts(
        self, built: SummaryRequest, window: int, *, owed: tuple[str, ...] = ()
    ) -> list[SummaryRequest]:
        """Split a model summarizer's request into calls of at most ``window`` tokens, summarized in a chain.

        A request sends the live prefix (the context, up to the budget) and then the span to summarize,
        each message up to ``entry_chars``: together they can exceed the model's window many times
        over, and a compaction that fails for the very reason it was asked for never ends (peers'
        compactions failed at 258k of 258k). Every call is sized as if it carried ``owed`` as
        ``lost`` (what a card check's retry may add: every instruction and todo item the span owes).
        Over the window, the prefix is left out first (it saves cache reads, nothing more). Still over,
        the original task is clipped like a message, then the span is cut into runs of whole messages in
        log order; each run is sent with the summary of the runs before it as the previous round's (the
        caller chains them: ``summary_worker``), so every call fits, and the last call's summary covers
        the whole span. A message too large for a call of its own has its text and its calls'
        arguments clipped further (head and tail kept), down to ``MIN_ENTRY_CHARS``; so does the task
        while nothing else fits.

        Raises:
            SummaryInputTooLargeError: the instruction, the card, the previous summary, the task and one
                message, each clipped to ``MIN_ENTRY_CHARS``, do not fit in one call.
        """
        prompt = self._prompt_tokens(msgspec.structs.replace(built, lost=owed))  # the same, prefix or not
        if self._head_tokens(built) + prompt <= window:
            return [built]
        alone = msgspec.structs.replace(built, prefix=None)
        if self._head_tokens(alone) + prompt <= window:
            return [alone]
        task = alone.original_task
        chars = min(len(task), self.entry_chars)
        room = self._room(alone, clip_text(task, chars), window, owed)
        smallest = self._smallest(built)
        while room < smallest and chars > MIN_ENTRY_CHARS:
            chars = max(MIN_ENTRY_CHARS, chars // 2)
            room = self._room(alone, clip_text(task, chars), window, owed)
        alone = msgspec.structs.replace(alone, original_task=clip_text(task, chars))
        if not built.entries and self.request_tokens(msgspec.structs.replace(alone, lost=owed)) <= window:
            return [alone]  # nothing to split: the task clipped was all it took
        if room <= 0 or not built.entries:
            detail = f"the task clipped to {chars:,} characters"
            raise SummaryInputTooLargeError(self._too_large(built, window, room, detail))
        runs: list[list[SpanEntry]] = [[]]
        used = 0
        for entry in built.entries:
            fitted, cost = self._within(entry, room, built, window)
            if runs[-1] and used + cost > room:
                runs.append([])
                used = 0
            runs[-1].append(fitted)
            used += cost
        last = len(runs) - 1
        return [
            msgspec.structs.replace(
                alone,
                entries=tuple(run),
                previous=built.previous if i == 0 else None,
                # an earlier call names its own run; the last keeps the span (the card check reads it)
                covers_from=built.covers_from if i in (0, last) else run[0].position,
                covers_through=built.covers_through if i == last else run[-1].position,
            )
            for i, run in enumerate(runs)
        ]

    def _room(self, alone: SummaryRequest, task: str, window: int, owed: tuple[str, ...]) -> int:
        """What a call leaves for its run of messages: the window less all else it sends.

        A later call's previous summary is an earlier call's answer: at most ``max_tokens`` tokens.
        """
        bare = msgspec.structs.replace(alone, entries=(), previous=None, original_task=task, lost=owed)
        previous = max(self.renderer.counter.count(alone.previous or ""), alone.max_tokens)
        return window - self.request_tokens(bare) - previous

    def _smallest(self, built: SummaryRequest) -> int:
        """The most a message of the span takes clipped to ``MIN_ENTRY_CHARS``: the room a call needs."""
        return max((self._entry_tokens(_clip_entry(e, MIN_ENTRY_CHARS)) for e in built.entries), default=1)

    def _within(
        self, entry: SpanEntry, room: int, built: SummaryRequest, window: int
    ) -> tuple[SpanEntry, int]:
        """``entry``, clipped to fit ``room`` tokens when it is larger, and what it takes of a call."""
        fitted, cost = entry, self._entry_tokens(entry)
        chars = max([len(entry.text), *(len(c.arguments) for c in entry.tool_calls)])
        while cost > room and chars > MIN_ENTRY_CHARS:
            chars = max(MIN_ENTRY_CHARS, chars // 2)
            fitted = _clip_entry(entry, chars)  # from the original: each omission counted once, truly
            cost = self._entry_tokens(fitted)
        if cost > room:
            detail = f"position {entry.position} takes {cost:,} clipped to {chars:,} characters"
            raise SummaryInputTooLargeError(self._too_large(built, window, room, detail))
        return fitted, cost

    @staticmethod
    def _too_large(built: SummaryRequest, window: int, room: int, detail: str) -> str:
        return (
            f"the summary request of positions {built.covers_from}-{built.covers_through} cannot be sent "
            f"in calls of {window:,} tokens: the instruction, card, previous summary and task leave "
            f"{max(room, 0):,} for the messages, and {detail}"
        )

    def _entry_tokens(self, entry: SpanEntry) -> int:
        """What one message adds to a summary prompt: its lines, counted, and a token per line break."""
        lines = entry_lines(entry)
        return self.renderer.counter.count("\n".join(lines)) + len(lines)

    def request_tokens(self, built: SummaryRequest) -> int:
        """Tokens a model summarizer sends: the live prefix or its system message, then the instruction."""
        return self._head_tokens(built) + self._prompt_tokens(built)

    def _head_tokens(self, built: SummaryRequest) -> int:
        """The live prefix's tokens, or those of the summarizer's own system message and request framing."""
        if built.prefix is not None:
            return built.prefix.tokens
        return system_tokens(self.renderer.counter.count(SUMMARY_SYSTEM), SUMMARY_SYSTEM)

    def _prompt_tokens(self, built: SummaryRequest) -> int:
        """The instruction's tokens, as the one message after the head."""
        return self.renderer.counter.count(summary_prompt(built)) + MESSAGE_OVERHEAD

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
                position=position, role="user", text=clip_text(self.ledger.text(event.content), limit)
            )
        if isinstance(event, AssistantMessageAdded):
            text = clip_text(self.ledger.text(event.content), limit)
            return SpanEntry(position=position, role="assistant", text=text, tool_calls=event.tool_calls)
        if isinstance(event, ToolResultRecorded):
            text = clip_text(self._head_tail(event.content, limit), limit)
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
            if isinstance(recorded.event, UserMessageAdded) and said_by_user(recorded.event):
                return self.ledger.text(recorded.event.content)
        return ""
