"""Compaction lineage (seed 000): each summary as a compaction turn, its parent, and what it summarized."""

from __future__ import annotations

import msgspec
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.kernel.summary_log import SummaryStream
from contextledger.domain.errors import ValidationError
from contextledger.domain.events import CompactionRequested, Fidelity, SummaryRecorded

__all__ = [
    "CompactionTurn",
    "SummaryText",
    "compaction_turns",
    "history_of",
    "summarized_positions",
    "summary_texts",
]


class CompactionTurn(msgspec.Struct, frozen=True, kw_only=True):
    """One compaction as a turn of the session: what it summarized, from which parent, at what size.

    ``summarized_through`` is the last position the summary stands for and ``first_kept`` the first
    one kept verbatim after it; ``new_from`` is where this round's own reading began (the parent
    covered the positions before it, so they were not read again).
    """

    summary_id: str
    round: int
    depth: int
    parent: str | None
    covers_from: int
    new_from: int
    summarized_through: int
    first_kept: int
    produced_at: int
    tokens_before: int | None
    tokens_after: int | None
    tokens: int | None
    trigger: str | None
    request_id: str | None
    summarizer: str | None
    model: str | None
    producer: str | None
    fidelity: Fidelity | None


def _turn(summary: SummaryRecorded, parent: SummaryRecorded | None, trigger: str | None) -> CompactionTurn:
    return CompactionTurn(
        summary_id=summary.summary_id,
        round=summary.round,
        depth=summary.depth,
        parent=summary.previous_summary_id,
        covers_from=summary.covers_from,
        new_from=parent.covers_through + 1 if parent is not None else summary.covers_from,
        summarized_through=summary.covers_through,
        first_kept=summary.covers_through + 1,
        produced_at=summary.produced_at,
        tokens_before=summary.tokens_before,
        tokens_after=summary.tokens_after,
        tokens=summary.tokens,
        trigger=trigger,
        request_id=summary.request_id,
        summarizer=summary.summarizer,
        model=summary.model,
        producer=summary.producer,
        fidelity=summary.fidelity,
    )


def compaction_turns(ledger: Ledger, session_id: str) -> list[CompactionTurn]:
    """Return every summary of the session as a compaction turn, in the order they were recorded."""
    ledger.version(session_id)  # SessionNotFoundError for an unknown session
    events = [r.event for r in SummaryStream(ledger.log, session_id).events()]
    triggers = {e.request_id: e.trigger for e in events if isinstance(e, CompactionRequested)}
    summaries = {e.summary_id: e for e in events if isinstance(e, SummaryRecorded)}
    return [
        _turn(s, summaries.get(s.previous_summary_id or ""), triggers.get(s.request_id or ""))
        for s in summaries.values()
    ]


def history_of(ledger: Ledger, session_id: str, summary_id: str) -> list[CompactionTurn]:
    """Return the chain of compactions that led to ``summary_id``: round 1 first, it last."""
    turns = {t.summary_id: t for t in compaction_turns(ledger, session_id)}
    if summary_id not in turns:
        raise ValidationError(f"session {session_id!r} has no summary {summary_id!r}")
    chain: list[CompactionTurn] = []
    current: str | None = summary_id
    while current is not None and current in turns and len(chain) <= len(turns):
        chain.append(turns[current])
        current = turns[current].parent
    return list(reversed(chain))


def summarized_positions(ledger: Ledger, session_id: str, summary_id: str) -> tuple[int, int]:
    """Return the first and last position of the turns this compaction itself summarized."""
    turn = history_of(ledger, session_id, summary_id)[-1]
    return turn.new_from, turn.summarized_through


class SummaryText(msgspec.Struct, frozen=True, kw_only=True):
    """A summary as its reader needs it: the text, the span it covers, its status and its fidelity.

    ``status`` is ``pending`` (requested, no artifact yet: ``text`` is empty), ``superseded`` (a
    later artifact covers its whole span: ``superseded_by``), ``withheld`` (every draft lost an
    instruction or todo item of the session-state card: never applied; ``fidelity.lost`` says what)
    or ``current``; a current artifact is available from ``produced_at`` on and applied at the next
    compaction point of a render after it. ``drafts`` is 2 when a low-fidelity first draft was retried.
    """

    summary_id: str | None
    request_id: str | None
    covers_from: int
    covers_through: int
    produced_at: int | None
    status: str
    superseded_by: str | None
    depth: int
    text: str
    fidelity: Fidelity | None
    drafts: int = 1
    measured_from: int | None = None
    """The first position whose facts ``fidelity`` measures: a round reads only the events after the span
    of the summary it integrates (``RequestBuilder``), so its fidelity is of those, to ``covers_through``."""


def summary_texts(ledger: Ledger, session_id: str) -> list[SummaryText]:
    """Return every summary of the session with its text, span, status and fidelity, in recorded order."""
    ledger.version(session_id)  # SessionNotFoundError for an unknown session
    events = [r.event for r in SummaryStream(ledger.log, session_id).events()]
    summaries = [e for e in events if isinstance(e, SummaryRecorded)]
    answered = {s.request_id for s in summaries if s.request_id}
    out: list[SummaryText] = []
    for event in events:
        if isinstance(event, CompactionRequested) and event.request_id not in answered:
            out.append(
                SummaryText(
                    summary_id=None,
                    request_id=event.request_id,
                    covers_from=event.covers_from,
                    covers_through=event.covers_through,
                    produced_at=None,
                    status="pending",
                    superseded_by=None,
                    depth=event.depth,
                    text="",
                    fidelity=None,
                )
            )
        elif isinstance(event, SummaryRecorded):
            later = next(
                (
                    o
                    for o in summaries
                    if o is not event
                    and not o.withheld
                    and o.covers_from <= event.covers_from
                    and o.covers_through >= event.covers_through
                    and (o.produced_at, o.depth) > (event.produced_at, event.depth)
                ),
                None,
            )
            out.append(
                SummaryText(
                    summary_id=event.summary_id,
                    request_id=event.request_id,
                    covers_from=event.covers_from,
                    covers_through=event.covers_through,
                    produced_at=event.produced_at,
                    status="withheld" if event.withheld else "current" if later is None else "superseded",
                    superseded_by=None if later is None else later.summary_id,
                    depth=event.depth,
                    text=ledger.text(event.content),
                    fidelity=event.fidelity,
                    drafts=event.drafts,
                    measured_from=_measured_from(event, summaries),
                )
            )
    return out


def _measured_from(event: SummaryRecorded, summaries: list[SummaryRecorded]) -> int:
    """The first position of the events read by the round that made ``event`` (as ``_entries`` reads)."""
    if event.depth > 0:
        return event.covers_from  # a deeper batch reads the batches of its whole span
    previous = next((s for s in summaries if s.summary_id == event.previous_summary_id), None)
    return previous.covers_through + 1 if previous is not None else event.covers_from
