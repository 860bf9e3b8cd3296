"""The session's own parts a report embeds: its events, its summaries, and the texts stored once."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
from contextledger.adapters.reports.report_model import CallData, EventData, SummaryData
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.search.log_search import searchable_texts
from contextledger.application.summaries.lineage import compaction_turns
from contextledger.domain.events import SessionStarted

__all__ = ["Texts", "events_of", "summaries_of"]


class Texts:
    """Interns texts: the page stores each distinct text once."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.texts: list[str] = []

    def id(self, text: str) -> int:
        """The index of ``text`` in ``texts`` (added the first time it is seen)."""
        found = self.ids.get(text)
        if found is None:
            found = self.ids[text] = len(self.texts)
            self.texts.append(text)
        return found


def events_of(ledger: Ledger, session_id: str, texts: Texts) -> list[EventData]:
    """Every event of the session as the report lists it: position, kind, tool, text, time."""
    out: list[EventData] = []
    for recorded in ledger.events(session_id):
        event = recorded.event
        parts = [text for text, _ in searchable_texts(ledger, event) if text]
        label = type(event).__name__.removesuffix("Added").removesuffix("Recorded")
        tool = next((name for _, name in searchable_texts(ledger, event) if name), None)
        if isinstance(event, SessionStarted):
            label = "SessionStarted"
        out.append(
            EventData(
                recorded.position,
                label,
                tool or "",
                texts.id("\n".join(parts)),
                event.at.isoformat() if event.at is not None else "",
            )
        )
    return out


def summaries_of(
    ledger: Ledger, session_id: str, calls: Sequence[CallData], texts: Texts
) -> list[SummaryData]:
    """Each summary artifact with its span, lineage, fidelity and the calls that sent it."""
    artifacts = {s.summary_id: s for s in ledger.summaries(session_id)}
    used: dict[str, list[int]] = {}
    for call in calls:
        if call.summary_id is not None:
            used.setdefault(call.summary_id, []).append(call.number)
    parents = {s.previous_summary_id for s in artifacts.values() if s.previous_summary_id}
    out: list[SummaryData] = []
    for turn in compaction_turns(ledger, session_id):
        artifact = artifacts[turn.summary_id]
        numbers = used.get(turn.summary_id, [])
        if numbers:
            status = f"sent in {len(numbers)} call(s)"
        elif turn.summary_id in parents:
            status = "superseded before any call sent it (integrated by a later round)"
        else:
            status = "recorded, sent in no call"
        out.append(
            SummaryData(
                summary_id=turn.summary_id,
                covers_from=turn.covers_from,
                covers_through=turn.summarized_through,
                new_from=turn.new_from,
                produced_at=turn.produced_at,
                text=texts.id(ledger.text(artifact.content)),
                model=turn.model,
                summarizer=turn.summarizer,
                prompt_sha=artifact.prompt_sha,
                round=turn.round,
                parent=turn.parent,
                trigger=turn.trigger,
                tokens=turn.tokens,
                tokens_before=turn.tokens_before,
                tokens_after=turn.tokens_after,
                fidelity=msgspec.structs.asdict(turn.fidelity) if turn.fidelity is not None else None,
                status=status,
                used_in=(numbers[0], numbers[-1]) if numbers else (),
            )
        )
    return out
