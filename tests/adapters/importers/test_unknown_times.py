"""Times a transcript never recorded stay unknown: no import time posing as event time (issue 18, item 8)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import contextledger
from contextledger.adapters.importers.service import import_file
from contextledger.adapters.summarizers.extractive import ExtractiveSummarizer
from contextledger.application.rebuild.simulator import simulate
from contextledger.domain.events import TIME_KEY, TIME_UNKNOWN, AssistantMessageAdded
from contextledger.projections.presets import PRESETS
from contextledger.projections.provider_cache import provider_cache

TRANSCRIPTS = Path(__file__).resolve().parents[2] / "fixtures" / "transcripts"
MINI = TRANSCRIPTS / "mini-swe-agent__psf__requests-1142.traj.json"
IMPORTED_BEFORE = "mini-swe-agent-psf__requests-1142-7dc3ab3989d0"
"""The id this file was imported under before times were marked (re-imports must find it unchanged)."""


def test_events_without_a_recorded_time_have_none_and_say_so(ledger):
    """mini-swe-agent records when each reply was created, nothing else: the rest is unknown, not now."""
    before = datetime.now(UTC)
    outcome = import_file(ledger, MINI)
    assert outcome.ok
    [info] = ledger.sessions()
    assert info.session_id == IMPORTED_BEFORE
    events = ledger.events(info.session_id)
    replies = [r.event for r in events if isinstance(r.event, AssistantMessageAdded)]
    others = [r.event for r in events if not isinstance(r.event, AssistantMessageAdded)]
    assert replies
    assert all(e.at is not None and e.at < before and TIME_KEY not in e.meta for e in replies)
    assert others
    assert all(e.at is None and e.meta[TIME_KEY] == TIME_UNKNOWN for e in others)
    [report] = outcome.reports()
    assert f"{len(others) - 1} message(s) carry no time of their own" in " ".join(report.notes)
    assert import_file(ledger, MINI).reports()[0].status == "unchanged"


def test_a_live_append_is_still_stamped_with_the_clock(ledger):
    """Only a time marked unknown stays unknown: an agent's append happens now."""
    session = ledger.start_session(system_prompt="s")
    position = ledger.add_user_message(session, "hello")
    [recorded] = ledger.events(session, after=position - 1, upto=position)
    assert recorded.event.at is not None
    assert TIME_KEY not in recorded.event.meta


def _simulate(name: str):
    with contextledger.open_ledger("memory://") as source:
        assert import_file(source, TRANSCRIPTS / name).ok
        sessions = [i.session_id for i in source.sessions()]
        return simulate(
            source,
            sessions,
            [("default", PRESETS["default"])],
            cache=provider_cache("anthropic", "5m"),
            new_scratch=lambda: contextledger.open_ledger("memory://"),
            budget=16_000,
            make_summarizer=lambda counter: ExtractiveSummarizer(counter=counter),
            tokenizer="heuristic",
        )


def test_simulate_counts_the_calls_whose_time_cannot_be_known():
    """OpenHands events carry zone-less times: every call is untimed; claude-code's are all timed."""
    untimed = _simulate("openhands-events__basic_gui_mode.json").totals["default"]
    assert untimed.calls > 0
    assert untimed.untimed_calls == untimed.calls
    assert untimed.expired_calls == 0
    timed = _simulate("claude-code__132b2f66-ee5f-46f6-8904-32d9dc4d36c3.jsonl").totals["default"]
    assert timed.calls > 0
    assert timed.untimed_calls == 0
