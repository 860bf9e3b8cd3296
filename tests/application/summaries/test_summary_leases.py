"""Summary leases: a dead holder frees its request at once on its host, and within a lease on any host."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import contextledger
import pytest
from contextledger.adapters.summarizers.extractive import ExtractiveSummarizer
from contextledger.adapters.system import worker_alive, worker_name
from contextledger.application.kernel.summary_log import SummaryStream
from contextledger.application.render.renderer import Renderer
from contextledger.application.summaries.compaction import Compactor
from contextledger.application.summaries.summary_worker import SummaryWorker, WorkerSettings
from contextledger.domain.events import SummaryAttemptStarted, SummaryLeaseRenewed

sys.path.insert(0, str(Path(__file__).parents[2] / "adapters" / "summarizers"))
from loopback import Reply, serve

CLI = str(Path(sys.executable).with_name("contextledger"))


class WallClock:
    """The real clock (heartbeats run on real time)."""

    def now(self) -> datetime:
        return datetime.now(UTC)


def _requested(ledger) -> tuple[str, str]:
    session = ledger.start_session(system_prompt="agent")
    ledger.add_user_message(session, "Fix src/app.py")
    for i in range(30):
        ledger.add_assistant_message(session, f"step {i} " + "word " * 120)
        ledger.add_user_message(session, f"go on {i}")
    renderer = Renderer(ledger, tokenizer="heuristic")
    summarizer = ExtractiveSummarizer(counter=renderer.counter)
    compactor = Compactor(
        ledger, renderer, summarizer=summarizer.name, summarizer_config=summarizer.config_sha
    )
    request = compactor.plan(session, "threshold", budget=3_000)
    assert request is not None
    return session, request.request_id


class Slow:
    """An extractive summarizer that takes ``seconds`` to answer."""

    def __init__(self, inner, seconds: float) -> None:
        self.inner, self.seconds = inner, seconds
        self.name, self.config_sha = inner.name, inner.config_sha
        self.entered = threading.Event()

    def summarize(self, request):
        self.entered.set()
        time.sleep(self.seconds)
        return self.inner.summarize(request)


def test_a_working_holder_keeps_its_lease_past_its_length_by_heartbeats():
    """A 2.5 s call under a 1 s lease: renewals keep it running, no other worker takes it over."""
    ledger = contextledger.open_ledger("memory://", clock=WallClock())
    session, request_id = _requested(ledger)
    renderer = Renderer(ledger, tokenizer="heuristic")
    inner = ExtractiveSummarizer(counter=renderer.counter)
    settings = WorkerSettings(lease=timedelta(seconds=1), heartbeat=timedelta(seconds=0.2))
    slow = Slow(inner, 2.5)
    first = SummaryWorker(ledger, renderer, slow, worker_id="host-a-1", settings=settings)
    other = SummaryWorker(
        ledger, renderer, inner, worker_id="host-b-2", settings=settings, holder_alive=lambda _: True
    )
    thread = threading.Thread(target=first.run_once)
    thread.start()
    assert slow.entered.wait(30)
    taken = 0
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        taken += other.run_once()
        time.sleep(0.1)
    thread.join(30)
    stream = SummaryStream(ledger.log, session)
    events = [r.event for r in stream.events()]
    assert taken == 0
    assert sum(isinstance(e, SummaryLeaseRenewed) for e in events) >= 3
    assert [e.worker for e in events if isinstance(e, SummaryAttemptStarted)] == ["host-a-1"]
    assert [a.request_id for a in stream.artifacts()] == [request_id]


def test_a_holder_that_stopped_beating_frees_its_request_within_a_lease():
    """A holder on another host that died (no heartbeat): its request is taken once its lease runs out."""
    ledger = contextledger.open_ledger("memory://", clock=WallClock())
    session, request_id = _requested(ledger)
    renderer = Renderer(ledger, tokenizer="heuristic")
    inner = ExtractiveSummarizer(counter=renderer.counter)
    stream = SummaryStream(ledger.log, session)
    now = datetime.now(UTC)
    stream.append(
        SummaryAttemptStarted(
            request_id=request_id,
            attempt=1,
            worker="elsewhere-7",
            lease_until=now + timedelta(seconds=1),
            at=now,
        )
    )
    worker = SummaryWorker(ledger, renderer, inner, worker_id="here-1", holder_alive=worker_alive)
    assert worker.run_once() == 0  # alive as far as anyone here can tell
    time.sleep(1.1)
    assert worker.run_once() == 1
    assert [a.request_id for a in stream.artifacts()] == [request_id]


def test_a_dead_holder_on_this_host_frees_its_request_at_once():
    """A lease held by a ``host-pid`` of this host whose process is gone is free, however long it runs."""
    ledger = contextledger.open_ledger("memory://", clock=WallClock())
    session, request_id = _requested(ledger)
    renderer = Renderer(ledger, tokenizer="heuristic")
    inner = ExtractiveSummarizer(counter=renderer.counter)
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )
    dead = f"{socket.gethostname()}-{gone.stdout.strip()}"
    live = f"{socket.gethostname()}-{os.getppid()}"
    assert not worker_alive(dead)
    assert worker_alive(live)
    assert worker_alive("another-host-1")
    assert worker_name() == f"{socket.gethostname()}-{os.getpid()}"
    stream = SummaryStream(ledger.log, session)
    now = datetime.now(UTC)
    stream.append(
        SummaryAttemptStarted(
            request_id=request_id, attempt=1, worker=dead, lease_until=now + timedelta(hours=1), at=now
        )
    )
    assert SummaryWorker(ledger, renderer, inner, worker_id="w2").run_once() == 0  # no liveness port: waits
    assert SummaryWorker(ledger, renderer, inner, worker_id="w2", holder_alive=worker_alive).run_once() == 1
    assert [a.request_id for a in stream.artifacts()] == [request_id]


@pytest.mark.parametrize("kills", [3])
def test_cli_workers_killed_mid_call_block_nothing(tmp_path, kills):
    """`worker` killed -9 in the model call, again and again: the next `worker --once` takes it at once."""
    db = f"sqlite:///{tmp_path / 'w.db'}"
    with contextledger.open_ledger(db) as ledger:
        session, request_id = _requested(ledger)
    answer = {
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "## Summary\nfixing"}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
    }
    hang = Reply(body=answer, delay=120)
    with serve(*[hang] * kills, Reply(body=answer)) as (url, script):
        env = dict(os.environ) | {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": f"{url}/v1"}
        args = [
            CLI,
            "worker",
            "--once",
            "--summarizer",
            "openai",
            "--tokenizer",
            "heuristic",
            "--db",
            db,
            "--json",
        ]
        for kill in range(kills):
            child = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for _ in range(1200):
                if len(script.received) > kill:
                    break
                time.sleep(0.05)
            assert len(script.received) == kill + 1, "the worker never reached the model"
            os.kill(child.pid, signal.SIGKILL)
            child.communicate(timeout=30)
        done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "processed": 1,
        "failed": 0,
    }  # was 0: stuck until the 5-minute lease ran out
    with contextledger.open_ledger(db) as ledger:
        stream = SummaryStream(ledger.log, session)
        assert [a.request_id for a in stream.artifacts()] == [request_id]
        assert stream.requests()[request_id].attempts == kills + 1
