"""Compaction lineage (seed 000): each summary as a compaction turn, its parent, and what it summarized."""

from __future__ import annotations

import msgspec
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.kernel.summary_log import SummaryStream
from contextledger.domain.errors import ValidationError
from contextledger.domain.events import CompactionRequested, Fidelity, SummaryRecorded

__all__ = ["CompactionTurn", "compaction_turns", "history_of", "summarized_positions"]


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
