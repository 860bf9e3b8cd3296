"""``contextledger.testing``: the fakes an agent's tests use behave as documented, and load nothing heavy."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import contextledger
import pytest
from contextledger.application.kernel.summary_log import SummaryStream
from contextledger.domain.errors import ConfigError, SummarizerUnavailableError, SummaryRejectedError
from contextledger.domain.events import SummaryAttemptFailed
from contextledger.projections.summary_requests import SummaryDraft, SummaryRequest
from contextledger.testing import (
    START,
    CountingIds,
    FixedClock,
    ScriptedSummarizer,
    check_anthropic_pairing,
    check_openai_pairing,
)


def test_fixed_clock_reads_its_start_then_steps():
    """Readings start at ``START`` and move one step each; a zero step moves only by ``advance``."""
    clock = FixedClock()
    assert [clock.now() for _ in range(3)] == [START + timedelta(seconds=s) for s in range(3)]
    manual = FixedClock(datetime(2030, 5, 1, tzinfo=UTC), step=timedelta(0))
    assert manual.now() == manual.now() == datetime(2030, 5, 1, tzinfo=UTC)
    manual.advance(minutes=2)
    manual.advance(timedelta(days=1), seconds=1)
    assert manual.now() == datetime(2030, 5, 2, 0, 2, 1, tzinfo=UTC)


def test_fixed_clock_refuses_a_naive_start():
    """A naive start would give events naive instants: refused with the package's ``ConfigError``."""
    with pytest.raises(ConfigError, match="timezone-aware"):
        FixedClock(datetime(2026, 1, 1))  # noqa: DTZ001 - the naive value is the point


def test_counting_ids_count_from_one_with_their_prefix():
    """Two sources count independently; the prefix is the caller's."""
    ids, others = CountingIds(), CountingIds("s-")
    assert [ids.new_id(), ids.new_id(), others.new_id()] == ["id-1", "id-2", "s-1"]


def test_a_ledger_on_the_fakes_is_deterministic():
    """Two ledgers fed the same calls over fresh fakes hold identical sessions, ids and instants."""

    def record() -> list[contextledger.Recorded]:
        with contextledger.open_ledger("memory://", clock=FixedClock(), ids=CountingIds()) as ledger:
            session = ledger.start_session(system_prompt="terse")
            ledger.add_user_message(session, "hello")
            assert session == "id-1"
            return ledger.events(session)

    first, second = record(), record()
    assert first == second
    assert [r.event.at for r in first] == [START, START + timedelta(seconds=1)]


def test_scripted_summarizer_follows_its_script_and_records_requests():
    """Fail, answer, then the last answer repeats; every request is kept; the worker sees each outcome."""
    clock = FixedClock(step=timedelta(0))
    ledger = contextledger.open_ledger("memory://", clock=clock, ids=CountingIds())
    session = ledger.start_session(system_prompt="agent")
    ledger.add_user_message(session, "Fix src/app.py")
    for i in range(30):
        call = {"id": f"c{i}", "name": "read_file", "arguments": {"path": f"m{i}.py"}}
        ledger.add_assistant_message(session, f"read {i}", tool_calls=[call])
        ledger.add_tool_result(session, f"c{i}", "x = 1\n" * 200)
    renderer = contextledger.Renderer(ledger, tokenizer="heuristic")
    draft = SummaryDraft(text="## Summary\nread m0..m29", model="m", output_tokens=7)
    scripted = ScriptedSummarizer(SummarizerUnavailableError("down"), draft, name="s", config_sha="c")
    compactor = contextledger.Compactor(ledger, renderer, summarizer="s", summarizer_config="c")
    request = compactor.plan(session, "threshold", budget=4_000, trigger="manual")
    assert request is not None
    worker = contextledger.SummaryWorker(ledger, renderer, scripted, worker_id="w")
    assert worker.run_once() == 1
    [failed] = [
        r.event
        for r in SummaryStream(ledger.log, session).events()
        if isinstance(r.event, SummaryAttemptFailed)
    ]
    assert failed.error_type == "SummarizerUnavailableError"
    clock.advance(hours=1)
    assert worker.run_once() == 1
    [artifact] = SummaryStream(ledger.log, session).artifacts()
    assert ledger.text(artifact.content) == draft.text
    assert [(r.covers_from, r.covers_through) for r in scripted.requests] == [
        (request.covers_from, request.covers_through)
    ] * 2
    assert scripted.summarize(scripted.requests[0]) is draft  # the last answer repeats
    assert (scripted.name, scripted.config_sha, len(scripted.requests)) == ("s", "c", 3)


def test_scripted_summarizer_texts_become_drafts_and_an_empty_script_is_refused():
    """A text is answered as a draft by the summarizer's name; no script at all is a ``ConfigError``."""
    with pytest.raises(ConfigError):
        ScriptedSummarizer()
    scripted = ScriptedSummarizer("one", SummaryRejectedError("empty"))
    request = SummaryRequest(
        session_id="s", covers_from=2, covers_through=3, round=1, original_task="t", entries=()
    )
    assert scripted.summarize(request) == SummaryDraft(text="one", model="scripted")
    with pytest.raises(SummaryRejectedError):
        scripted.summarize(request)


def test_the_wire_checks_find_an_orphaned_result():
    """The pairing oracle, as exported: a result without its call is a problem on both wires."""
    openai = {
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "tool", "tool_call_id": "c1", "content": "x"},
        ]
    }
    assert [p.kind for p in check_openai_pairing(openai)] == ["orphaned_result"]
    anthropic = {
        "messages": [
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "x"}]}
        ]
    }
    assert [p.kind for p in check_anthropic_pairing(anthropic)] == ["orphaned_result"]


def test_importing_the_testing_module_loads_no_store_tokenizer_or_client():
    """``import contextledger`` leaves it unloaded; importing it loads no store, tokenizer or HTTP client."""
    script = (
        "import json, sys, contextledger\n"
        "before = 'contextledger.testing' in sys.modules\n"
        "import contextledger.testing\n"
        "print(json.dumps([before, sorted(sys.modules)]))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stderr == ""
    before, loaded = json.loads(done.stdout)
    assert before is False
    heavy = (
        "contextledger.adapters.store",
        "contextledger.application",
        "psycopg",
        "eventsourcing",
        "tiktoken",
        "httpx",
        "structlog",
    )
    assert [m for m in loaded if any(m == h or m.startswith(h + ".") for h in heavy)] == []
