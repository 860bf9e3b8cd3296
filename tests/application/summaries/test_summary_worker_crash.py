"""A worker killed with SIGKILL during a summarizer call resumes: exactly one artifact per request."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import contextledger
from contextledger.adapters.summarizers.extractive import ExtractiveSummarizer
from contextledger.application.kernel.summary_log import SummaryStream
from contextledger.application.render.renderer import Renderer
from contextledger.application.summaries.compaction import Compactor
from contextledger.domain.events import SummaryAttemptStarted

CHILD = """
import sys, time, pathlib
import contextledger
from contextledger.adapters.summarizers.extractive import ExtractiveSummarizer
from contextledger.application.render.renderer import Renderer
from contextledger.application.summaries.summary_worker import SummaryWorker

url, marker, mode = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[3]
ledger = contextledger.open_ledger(url)
renderer = Renderer(ledger, tokenizer="heuristic")
inner = ExtractiveSummarizer(counter=renderer.counter)

class Slow:
    name = inner.name
    config_sha = inner.config_sha
    def summarize(self, request):
        marker.write_text("in the call")
        if mode == "hang":
            time.sleep(600)
        return inner.summarize(request)

done = SummaryWorker(ledger, renderer, Slow(), worker_id="worker-1").run_once()
print(done)
"""


def _session(url: str) -> tuple[str, str]:
    with contextledger.open_ledger(url) as ledger:
        session = ledger.start_session(
            system_prompt="agent", tools=[{"name": "read_file", "parameters": {"type": "object"}}]
        )
        ledger.add_user_message(session, "Fix src/app.py")
        for i in range(40):
            ledger.add_assistant_message(
                session, f"Reading {i}.", tool_calls=[{"id": f"c{i}", "name": "read_file", "arguments": {}}]
            )
            ledger.add_tool_result(session, f"c{i}", f"line {i}\n" * 150)
        renderer = Renderer(ledger, tokenizer="heuristic")
        summarizer = ExtractiveSummarizer(counter=renderer.counter)
        compactor = Compactor(
            ledger, renderer, summarizer=summarizer.name, summarizer_config=summarizer.config_sha
        )
        request = compactor.plan(session, "threshold", budget=6_000)
        assert request is not None
        return session, request.request_id


def _worker(url: str, marker: Path, mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, url, str(marker), mode], stdout=subprocess.PIPE, text=True
    )


def test_killed_mid_call_then_restarted_records_exactly_one_artifact(tmp_path):
    """SIGKILL during the summarizer call leaves a started attempt and no artifact; a restart finishes it."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    session, request_id = _session(url)
    marker = tmp_path / "marker"
    child = _worker(url, marker, "hang")
    for _ in range(600):
        if marker.exists():
            break
        time.sleep(0.05)
    assert marker.exists(), "the worker never reached the summarizer"
    os.kill(child.pid, signal.SIGKILL)
    child.communicate(timeout=30)
    with contextledger.open_ledger(url) as ledger:
        stream = SummaryStream(ledger.log, session)
        assert any(isinstance(r.event, SummaryAttemptStarted) for r in stream.events())
        assert stream.artifacts() == []
    restarted = _worker(url, tmp_path / "marker2", "fast")
    out, _ = restarted.communicate(timeout=120)
    assert restarted.returncode == 0
    assert out.strip().splitlines()[-1] == "1"
    again = _worker(url, tmp_path / "marker3", "fast")
    out, _ = again.communicate(timeout=120)
    assert out.strip().splitlines()[-1] == "0"  # nothing left to do
    with contextledger.open_ledger(url) as ledger:
        artifacts = SummaryStream(ledger.log, session).artifacts()
        assert [a.request_id for a in artifacts] == [request_id]
        status = SummaryStream(ledger.log, session).requests()[request_id]
        assert status.attempts == 2
