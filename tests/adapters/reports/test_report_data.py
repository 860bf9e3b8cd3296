"""The inspector's data: recorded and computed calls, tiers that add up, texts stored once, inert page."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import contextledger
import pytest
from contextledger.adapters.importers.service import import_file
from contextledger.adapters.reports.page import content_security_policy, embed_json, render_page
from contextledger.adapters.reports.report_data import build_report
from contextledger.adapters.reports.report_model import CATEGORIES
from contextledger.adapters.summarizers.extractive import ExtractiveSummarizer
from contextledger.application.audit.call_recorder import CallRecorder
from contextledger.application.render.renderer import Renderer
from contextledger.domain.errors import SessionNotFoundError
from contextledger.projections.presets import PRESETS
from contextledger.projections.provider_cache import provider_cache
from hypothesis import given
from hypothesis import strategies as st

TRANSCRIPT = (
    Path(__file__).resolve().parents[2]
    / "fixtures"
    / "transcripts"
    / "swe-agent__marshmallow-code__marshmallow-1867__fc-replace-from-source.traj"
)
NOW = datetime(2026, 11, 24, tzinfo=UTC)


def _report(ledger, session_id, **options):
    return build_report(
        ledger,
        session_id,
        policy=("default", PRESETS["default"]),
        cache=provider_cache("anthropic", "5m"),
        new_scratch=lambda: contextledger.open_ledger("memory://"),
        now=NOW,
        make_summarizer=lambda counter: ExtractiveSummarizer(counter=counter),
        tokenizer="heuristic",
        **options,
    )


@pytest.fixture(scope="module")
def imported():
    """The marshmallow SWE-agent transcript in an in-memory ledger."""
    ledger = contextledger.open_ledger("memory://")
    outcome = import_file(ledger, TRANSCRIPT)
    assert outcome.ok
    return ledger, outcome.sessions[0].session_id


def _check_call(data, call) -> None:
    texts = data.texts
    assert sum(call.tiers.values()) == call.tokens
    assert set(call.tiers) == set(CATEGORIES)
    assert sum(block.tokens for block in call.blocks) == call.tokens
    assert all(0 <= block.text < len(texts) for block in call.blocks)
    assert call.cached + call.written <= call.tokens
    assert call.runs[-1].last == call.position
    read = [block.cache == "read" for block in call.blocks]
    assert read == sorted(read, reverse=True), "cache reads are a prefix of the blocks"


def test_computed_calls_add_up_and_store_each_text_once(imported):
    """An imported session: one call per assistant message, exact tiers, texts interned, diffs consistent."""
    ledger, session = imported
    data = _report(ledger, session, budget=8000, compare=("threshold", PRESETS["threshold"]))
    assistants = [
        r.position for r in ledger.events(session) if type(r.event).__name__ == "AssistantMessageAdded"
    ]
    assert data.source == "computed"
    assert [c.position for c in data.calls] == [p - 1 for p in assistants if p > 1]
    assert len(set(data.texts)) == len(data.texts)
    assert len(data.events) == ledger.version(session)
    for call in data.calls:
        _check_call(data, call)
    assert data.calls[0].diff is None
    for before, call in zip(data.calls, data.calls[1:], strict=False):
        diff = call.diff
        assert diff is not None
        assert 0 <= diff.common_tokens <= min(before.tokens, call.tokens)
        assert all(2 <= i < len(call.blocks) for i in diff.added)
        if diff.added:
            assert diff.first_different <= min(diff.added)
        shared = call.blocks if diff.first_different == -1 else call.blocks[: diff.first_different]
        assert diff.common_tokens == sum(b.tokens for b in shared)
        assert all(2 <= i < len(before.blocks) for i in diff.removed)
        assert diff.cost_delta == pytest.approx(call.cost - before.cost, abs=0.02)
    assert any(c.compaction for c in data.calls)
    assert data.summaries
    assert any(s.used_in for s in data.summaries)
    assert data.compare is not None
    assert [c.position for c in data.compare] == [c.position for c in data.calls]


def test_recorded_calls_are_shown_as_recorded_and_replay(imported):
    """Calls recorded through the audit are the ones shown, each rendering again as recorded."""
    source, session = imported
    ledger = contextledger.open_ledger("memory://")
    assert import_file(ledger, TRANSCRIPT).ok
    renderer = Renderer(ledger, tokenizer="heuristic")
    recorder = CallRecorder(ledger)
    positions = [
        r.position - 1 for r in ledger.events(session) if type(r.event).__name__ == "AssistantMessageAdded"
    ]
    for position in positions[1:8]:
        context = renderer.render(session, PRESETS["threshold"], at=position, budget=6000)
        recorder.record(context, PRESETS["threshold"])
    data = _report(ledger, session)
    assert data.source == "recorded"
    assert data.policy == "threshold"
    assert [c.position for c in data.calls] == positions[1:8]
    assert all(c.replay_matches for c in data.calls)
    assert [c.call_id for c in data.calls] == [v.record.call_id for v in recorder.calls(session)]
    for call in data.calls:
        _check_call(data, call)
        assert call.budget == 6000
    del source


def test_an_unknown_session_is_a_typed_error(imported):
    """A session that does not exist raises SessionNotFoundError before anything is built."""
    ledger, _ = imported
    with pytest.raises(SessionNotFoundError):
        _report(ledger, "no-such-session")


@given(st.text())
def test_embedded_json_round_trips_and_holds_no_markup(text):
    """Any text embeds with no '<', '>', '&' or U+2028/2029 left, and parses back to itself."""
    embedded = embed_json({"t": text})
    assert not set(embedded) & {"<", ">", "&", "\u2028", "\u2029"}
    assert json.loads(embedded) == {"t": text}


def test_the_page_runs_only_its_own_script_under_its_policy(imported):
    """The CSP names the hashes of the inline script and style; nothing else may load or connect."""
    ledger, session = imported
    page = render_page(_report(ledger, session, budget=8000))
    script = page.split("<script>")[1].split("</script>")[0]
    style = page.split("<style>")[1].split("</style>")[0]
    policy = content_security_policy(script, style)
    assert f'content="{policy}"' in page
    assert "default-src 'none'" in policy
    assert "connect-src 'none'" in policy
    assert "unsafe" not in policy
    assert page.count("<script") == 2
