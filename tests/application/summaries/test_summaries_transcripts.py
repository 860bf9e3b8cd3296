"""Every preset, with the extractive summarizer's worker running, on every real transcript session."""

from __future__ import annotations

from pathlib import Path

import contextledger
import pytest
from contextledger.adapters.formats.anthropic import to_anthropic
from contextledger.adapters.formats.openai import to_openai
from contextledger.adapters.importers.service import import_file
from contextledger.adapters.summarizers.extractive import ExtractiveSummarizer
from contextledger.application.audit.session_replay import replay_calls
from contextledger.application.kernel.summary_log import SummaryStream
from contextledger.domain.content import text_chars
from contextledger.projections.presets import PRESETS
from contextledger.testing import check_anthropic_pairing, check_openai_pairing

BUDGET = 32_000
LONG_CHARS = 4 * BUDGET
"""A session whose texts hold this many characters is far over the budget: summaries must be used."""
SKIP = {"FORMATS.md", "PROVENANCE.md"}
TRANSCRIPTS = Path(__file__).resolve().parents[2] / "fixtures" / "transcripts"


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """All transcripts in one SQLite ledger."""
    transcripts = TRANSCRIPTS
    ledger = contextledger.open_ledger(f"sqlite:///{tmp_path_factory.mktemp('summaries') / 'all.db'}")
    for path in sorted(transcripts.iterdir()):
        if path.name not in SKIP:
            assert import_file(ledger, path).ok
    return ledger


def _chars(ledger, session_id: str) -> int:
    total = 0
    for recorded in ledger.events(session_id):
        content = getattr(recorded.event, "content", None)
        if content is not None:
            total += text_chars(content)
    return total


@pytest.mark.parametrize("preset", list(PRESETS))
def test_every_call_is_within_budget_and_long_sessions_are_summarized(source, preset):
    """Before every model call: within budget, paired in both wire formats; long sessions use summaries."""
    policy = PRESETS[preset]
    long_sessions = {i.session_id for i in source.sessions() if _chars(source, i.session_id) > LONG_CHARS}
    assert len(long_sessions) >= 3
    summarized: set[str] = set()
    calls = requests = 0
    for info in source.sessions():
        scratch = contextledger.open_ledger("memory://")
        for call in replay_calls(
            source,
            info.session_id,
            scratch,
            policy,
            budget=BUDGET,
            make_summarizer=lambda counter: ExtractiveSummarizer(counter=counter),
            tokenizer="heuristic",
        ):
            calls += 1
            requests += call.requested is not None
            context = call.context
            assert context.tokens <= context.budget, (info.session_id, call.position)
            assert check_openai_pairing(to_openai(context)) == [], (info.session_id, call.position)
            assert check_anthropic_pairing(to_anthropic(context)) == [], (info.session_id, call.position)
            if context.summary_id is not None:
                summarized.add(info.session_id)
                kinds = [m.kind for m in context.messages]
                assert "summary" in kinds
                if preset == "threshold":  # seed 004: the summary follows the system message
                    assert kinds[0] == "summary"
        for artifact in SummaryStream(scratch.log, info.session_id).artifacts():
            assert artifact.tokens is not None
            assert artifact.producer == "worker"
    assert long_sessions <= summarized, sorted(long_sessions - summarized)
    assert requests * 25 <= calls  # at most one summary call per 25 model calls over the whole corpus
