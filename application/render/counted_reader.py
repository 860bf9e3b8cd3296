"""Reads a session's events counted through the token cache, with due summary artifacts interleaved."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence

import msgspec
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.kernel.token_cache import CachedTokenCounter
from contextledger.domain.content import BlobText, InlineText, Text
from contextledger.domain.events import (
    AnyEvent,
    AssistantMessageAdded,
    Recorded,
    SummaryRecorded,
    ToolResultRecorded,
)
from contextledger.projections.counting import CountedEvent, counted_texts
from contextledger.projections.fold import Projector

__all__ = ["CHUNK", "CountedReader", "Seen"]

CHUNK = 2_000
"""Events read and counted per batch while catching up."""


class Seen(msgspec.Struct):
    """What one catch-up folded besides events: summary ids and the tool names called or answered.

    ``tools`` is None when nobody asks for the names (only a policy whose retention names tools does).
    """

    summaries: set[str] = msgspec.field(default_factory=set)
    tools: set[str] | None = msgspec.field(default_factory=set)


def _add_tools(events: list[CountedEvent], tools: set[str] | None) -> None:
    """Add the names of the tools ``events`` call or answer to ``tools`` (None: nobody asks for them)."""
    if tools is None:
        return
    for counted in events:
        event = counted.event
        if isinstance(event, AssistantMessageAdded):
            for call in event.tool_calls:
                tools.add(call.name)
        elif isinstance(event, ToolResultRecorded) and event.tool_name:
            tools.add(event.tool_name)


class CountedReader:
    """Yields the counted events of a session span: read in chunks (or handed in), counted per batch.

    Blobs are read only when the projector must cut one (``Projector.needs_text``) or to render a
    message verbatim (``resolve``), and the last ``max_blobs`` texts are kept.
    """

    def __init__(self, ledger: Ledger, counter: CachedTokenCounter, *, max_blobs: int = 256) -> None:
        """Read from ``ledger``, count through ``counter``."""
        self.ledger = ledger
        self.counter = counter
        self._blobs: OrderedDict[str, str] = OrderedDict()
        self._max_blobs = max_blobs
        self.preread: dict[str, list[CountedEvent]] = {}
        """Events a caller already read and counted, by session (contiguous, ending at the span's end)."""

    def counted(
        self,
        session_id: str,
        projector: Projector,
        span: tuple[int, int],
        due: dict[int, list[SummaryRecorded]],
        seen: Seen,
    ) -> Iterable[CountedEvent]:
        """The counted events in ``span`` (after, upto] with each due artifact after its position.

        Read lazily, a chunk at a time, unless a caller read them already (``preread``) and no artifact
        is due: then they are that list itself (a fold iterates over it without a generator's step).
        """
        after, position = span
        read = self._preread_span(session_id, after, position)
        if read is not None and not due:
            _add_tools(read, seen.tools)
            return read
        return self._lazily(session_id, projector, after, position, read, due=due, seen=seen)

    def _lazily(
        self,
        session_id: str,
        projector: Projector,
        after: int,
        position: int,
        read: list[CountedEvent] | None,
        *,
        due: dict[int, list[SummaryRecorded]],
        seen: Seen,
    ) -> Iterator[CountedEvent]:
        """``counted`` read a chunk at a time (or from ``read``, the pre-read span), artifacts between."""
        yield from self._summaries(due.pop(after, []), seen)
        chunks = [read] if read is not None else self._counted_chunks(session_id, projector, after, position)
        for chunk in chunks:
            _add_tools(chunk, seen.tools)
            for counted in chunk:
                yield counted
                if due:
                    yield from self._summaries(due.pop(counted.position, []), seen)

    def resolve(self, text: Text) -> str:
        """Return a text's full content, reading (and keeping) a blob."""
        if isinstance(text, InlineText):
            return text.text
        cached = self._blobs.get(text.sha256)
        if cached is None:
            cached = self._blobs[text.sha256] = self.ledger.text(text)
            while len(self._blobs) > self._max_blobs:
                self._blobs.popitem(last=False)
        else:
            self._blobs.move_to_end(text.sha256)
        return cached

    def _summaries(self, summaries: list[SummaryRecorded], seen: Seen) -> list[CountedEvent]:
        if not summaries:
            return []
        counts = self.counter.count_texts([s.content for s in summaries])
        seen.summaries.update(s.summary_id for s in summaries)
        return [
            CountedEvent(position=s.produced_at, event=s, tokens=(tokens,))
            for s, tokens in zip(summaries, counts, strict=True)
        ]

    def _preread_span(self, session_id: str, after: int, upto: int) -> list[CountedEvent] | None:
        """The events of (after, upto] a caller read already, when ``preread`` holds them all."""
        read = self.preread.get(session_id)
        if read and read[0].position <= after + 1 and read[-1].position == upto:
            first = after + 1 - read[0].position
            return read if first == 0 else read[first:]
        return None

    def _counted_chunks(
        self, session_id: str, projector: Projector, after: int, upto: int
    ) -> Iterator[list[CountedEvent]]:
        while after < upto:
            end = min(after + CHUNK, upto)
            chunk = self.ledger.events(session_id, after=after, upto=end)
            if not chunk:
                return
            yield self.count(projector, chunk)
            after = chunk[-1].position

    def with_counts(
        self, projector: Projector, position: int, event: AnyEvent, tokens: tuple[int, ...]
    ) -> CountedEvent:
        """Return an event with counts known already, its blob text resolved if the policy must cut it."""
        counted = CountedEvent(position=position, event=event, tokens=tokens)
        content = getattr(event, "content", None)
        if isinstance(content, BlobText) and projector.needs_text(counted):
            counted = msgspec.structs.replace(counted, full_text=self.resolve(content))
        return counted

    def count(
        self, projector: Projector, chunk: Sequence[Recorded], texts: Sequence[list[Text]] | None = None
    ) -> list[CountedEvent]:
        """Count a chunk of events in one batch through the cache; resolve blobs the policy must cut.

        ``texts``: each event's ``counted_texts`` when the caller has them already.
        """
        if texts is None:
            texts = [counted_texts(r.event) for r in chunk]
        flat = self.counter.count_texts([t for group in texts for t in group])
        out: list[CountedEvent] = []
        at = 0
        for recorded, group in zip(chunk, texts, strict=True):
            end = at + len(group)
            out.append(self.with_counts(projector, recorded.position, recorded.event, tuple(flat[at:end])))
            at = end
        return out
