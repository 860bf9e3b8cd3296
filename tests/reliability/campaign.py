"""The kill -9 campaign: writers, importers, the summary worker and rebuilds killed at random points.

Run by ``test_campaign.py`` (short in CI, long with ``CONTEXTLEDGER_LONG=1``) or by hand:
``python tests/reliability/campaign.py sqlite:///tmp/c.db 20`` prints the figures as JSON. As a child
process, ``campaign.py writer URL SESSION WID ACKS`` appends ``WID-n`` messages under the idempotency key
``WID-n`` (the README's retry recipe), resuming after the last number in ACKS, and writes each number to
ACKS only once the append returned: an acknowledged message is one a caller was told is stored.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from contextlib import suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import contextledger

CLI = str(Path(sys.executable).with_name("contextledger"))
HERE = Path(__file__)
TRANSCRIPT = "mini-swe-agent__psf__requests-1142.traj.json"


@dataclass
class Figures:
    """What one campaign did and found."""

    backend: str
    kills: Counter[str] = field(default_factory=Counter)
    acknowledged: int = 0
    lost: int = 0
    duplicated: int = 0
    stuck: int = 0
    leases_left: int = 0
    views_differing: int = 0
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The figures as JSON-ready data."""
        found = asdict(self)
        found["kills"] = dict(self.kills)
        found["total_kills"] = sum(self.kills.values())
        return found


def _env() -> dict[str, str]:
    return dict(os.environ) | {"PYTHONUNBUFFERED": "1"}


def _kill_after(child: subprocess.Popen[Any], delay: float) -> bool:
    """SIGKILL ``child`` after ``delay`` s; return whether it was still running (a kill, not a late one)."""
    deadline = time.monotonic() + delay
    while time.monotonic() < deadline:
        if child.poll() is not None:
            return False
        time.sleep(0.005)
    with suppress(ProcessLookupError):
        os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=60)
    return child.returncode == -signal.SIGKILL


# -- writers ------------------------------------------------------------------------------------


def writer(url: str, session_id: str, wid: str, acks: Path) -> None:
    """Child: append WID-n after the last acknowledged n, acknowledging each append once it returned."""
    done = [int(line) for line in acks.read_text().split()] if acks.exists() else []
    n = max(done, default=-1) + 1
    with contextledger.open_ledger(url) as ledger, acks.open("a") as out:
        while True:
            key = f"{wid}-{n}"
            while True:
                try:
                    ledger.add_user_message(session_id, key, idempotency_key=key)
                    break
                except contextledger.ConcurrencyConflictError:
                    time.sleep(random.uniform(0, 0.002))
            out.write(f"{n}\n")
            out.flush()
            n += 1


def kill_writers(url: str, folder: Path, kills: int, figures: Figures, rng: random.Random) -> None:
    """Kill writers (two at a time on one session) ``kills`` times; check acknowledged = stored once."""
    with contextledger.open_ledger(url) as ledger:
        session = ledger.start_session(system_prompt="campaign writers")
    wids = [f"w{i}" for i in range(max(2, kills // 3))]
    for k in range(kills):
        wid = wids[k % len(wids)]
        pair = [wid, wids[(k + 1) % len(wids)]]
        children = [
            subprocess.Popen(
                [sys.executable, str(HERE), "writer", url, session, w, str(folder / f"acks-{w}")],
                env=_env(),
                stderr=subprocess.DEVNULL,
            )
            for w in pair
        ]
        acks = folder / f"acks-{wid}"
        size = acks.stat().st_size if acks.exists() else 0
        deadline = time.monotonic() + 120
        while (acks.stat().st_size if acks.exists() else 0) == size and time.monotonic() < deadline:
            time.sleep(0.01)  # the writer is appending now: kill it at a random point from here
        delay = rng.uniform(0.0, 0.5)
        figures.kills["writer"] += sum(
            _kill_after(c, delay if i == 0 else 0.0) for i, c in enumerate(children)
        )
    with contextledger.open_ledger(url) as ledger:
        stored = Counter(ledger.text(r.event.content) for r in ledger.events(session)[1:])
    for wid in wids:
        path = folder / f"acks-{wid}"
        acked = {f"{wid}-{n}" for n in path.read_text().split()} if path.exists() else set()
        figures.acknowledged += len(acked)
        figures.lost += sum(1 for text in acked if stored[text] == 0)
    figures.duplicated += sum(count - 1 for count in stored.values() if count > 1)


# -- importers ----------------------------------------------------------------------------------


def kill_importers(url: str, transcripts: Path, kills: int, figures: Figures, rng: random.Random) -> None:
    """Kill `contextledger import` ``kills`` times, then import once more: one session, as a clean import."""
    source = transcripts / TRANSCRIPT
    with contextledger.open_ledger("memory://") as clean:
        [report] = contextledger.import_file(clean, source).sessions
        expected = [type(r.event).__name__ for r in clean.events(report.session_id)]
    for _ in range(kills):
        child = subprocess.Popen(
            [CLI, "import", str(source), "--db", url, "--json"],
            env=_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        figures.kills["importer"] += _kill_after(child, rng.uniform(0.3, 3.0))
    done = subprocess.run(
        [CLI, "import", str(source), "--db", url, "--json"], capture_output=True, check=False
    )
    if done.returncode != 0:
        figures.problems.append(f"import after kills failed: {done.stderr.decode()[-300:]}")
        return
    with contextledger.open_ledger(url) as ledger:
        ours = [s for s in ledger.sessions() if s.session_id.startswith("mini-swe-agent")]
        if len(ours) != 1:
            figures.duplicated += max(0, len(ours) - 1)
            figures.problems.append(f"{len(ours)} sessions for one transcript")
            return
        got = [type(r.event).__name__ for r in ledger.events(ours[0].session_id)]
    if got != expected:
        figures.problems.append(f"imported {len(got)} events, a clean import has {len(expected)}")
        figures.lost += max(0, len(expected) - len(got))
        figures.duplicated += max(0, len(got) - len(expected))


# -- the summary worker ---------------------------------------------------------------------------


def _compaction_requests(url: str, sessions: int) -> list[str]:
    from contextledger.application.render.renderer import Renderer  # noqa: PLC0415
    from contextledger.application.summaries.compaction import Compactor  # noqa: PLC0415

    made = []
    with contextledger.open_ledger(url) as ledger:
        renderer = Renderer(ledger, tokenizer="heuristic")
        summarizer = contextledger.make_summarizer("openai", counter=renderer.counter, model="m")
        compactor = Compactor(
            ledger, renderer, summarizer=summarizer.name, summarizer_config=summarizer.config_sha
        )
        for s in range(sessions):
            session = ledger.start_session(system_prompt=f"campaign summaries {s}")
            ledger.add_user_message(session, "Fix src/app.py")
            for i in range(30):
                ledger.add_assistant_message(session, f"step {i} " + "word " * 120)
                ledger.add_user_message(session, f"go on {i}")
            request = compactor.plan(session, "threshold", budget=3_000)
            if request is not None:
                made.append(request.request_id)
    return made


def kill_summary_workers(url: str, kills: int, figures: Figures, rng: random.Random, serve: Any) -> None:
    """Kill `contextledger worker` at random points, mostly inside the model call; then one `--once` run."""
    from contextledger.application.kernel.summary_log import SummaryStream  # noqa: PLC0415

    requests = _compaction_requests(url, sessions=max(2, kills // 4))
    answer = {
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "## Summary\nfixing src/app.py"}}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
    }
    hang = {"body": answer, "delay": 600.0}
    with serve(*[hang] * (kills * 2), {"body": answer}) as (base, script):
        env = _env() | {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": f"{base}/v1"}
        args = [
            CLI,
            "worker",
            "--summarizer",
            "openai",
            "--model",
            "m",
            "--tokenizer",
            "heuristic",
            "--db",
            url,
        ]
        for _ in range(kills):
            before = len(script.received)
            child = subprocess.Popen(
                [*args, "--poll", "0.1"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            if rng.random() < 0.7:  # inside the model call
                deadline = time.monotonic() + 60
                while len(script.received) == before and time.monotonic() < deadline and child.poll() is None:
                    time.sleep(0.01)
                figures.kills["summary_worker"] += _kill_after(child, rng.uniform(0.0, 0.3))
            else:  # anywhere: starting up, listing, taking the lease
                figures.kills["summary_worker"] += _kill_after(child, rng.uniform(0.2, 2.5))
        script.replies[:] = [type(script.replies[-1])(body=answer)]
        done = subprocess.run(
            [*args, "--once", "--json"], env=env, capture_output=True, text=True, check=False
        )
    if done.returncode != 0:
        figures.problems.append(f"worker after kills failed: {done.stderr[-300:]}")
    with contextledger.open_ledger(url) as ledger:
        statuses = []
        for info in ledger.sessions():
            if info.session_id.count("::") or not info.session_id:
                continue
            stream = SummaryStream(ledger.log, info.session_id)
            artifacts = Counter(a.request_id for a in stream.artifacts())
            figures.duplicated += sum(n - 1 for n in artifacts.values() if n > 1)
            statuses.extend(stream.requests().values())
        now = ledger.clock.now()
        by_id = {s.request.request_id: s for s in statuses}
        figures.stuck += sum(1 for r in requests if r not in by_id or by_id[r].status(now) != "done")
        figures.leases_left += sum(1 for s in statuses if s.status(now) == "running")


# -- rebuilds -----------------------------------------------------------------------------------


def kill_rebuilds(url: str, kills: int, figures: Figures, rng: random.Random) -> None:
    """Kill `contextledger rebuild` (single and sharded) at random, then complete one.

    The completed rebuild serves renders equal to renders folded from the log.
    """
    base = [
        CLI,
        "rebuild",
        "--policy",
        "threshold",
        "--budget",
        "8000",
        "--tokenizer",
        "heuristic",
        "--db",
        url,
    ]
    for k in range(kills):
        workers = ["--workers", "2"] if k % 2 and url.startswith("sqlite") else ["--workers", "1"]
        child = subprocess.Popen(
            [*base, *workers, "--json"], env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        figures.kills["rebuild"] += _kill_after(child, rng.uniform(0.3, 4.0))
    done = subprocess.run([*base, "--switch", "--json"], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        figures.problems.append(f"rebuild after kills failed: {done.stderr[-300:]}")
        figures.leases_left += "ProjectionLocked" in done.stderr
        return
    with contextledger.open_ledger(url) as ledger:
        sessions = [s.session_id for s in ledger.sessions()]
    for session in sessions[:5]:
        common = [
            session,
            "--policy",
            "threshold",
            "--budget",
            "8000",
            "--tokenizer",
            "heuristic",
            "--db",
            url,
            "--json",
        ]
        served = subprocess.run(
            [CLI, "render", *common, "--from-projection"], capture_output=True, text=True, check=False
        )
        fresh = subprocess.run([CLI, "render", *common], capture_output=True, text=True, check=False)
        if served.returncode != 0 or fresh.returncode != 0:
            figures.problems.append(f"render of {session} failed: {(served.stderr or fresh.stderr)[-300:]}")
            figures.views_differing += 1
            continue
        keys = ("messages", "tokens", "decisions")
        a, b = json.loads(served.stdout), json.loads(fresh.stdout)
        figures.views_differing += any(a.get(key) != b.get(key) for key in keys)


def run(url: str, folder: Path, transcripts: Path, *, rounds: int, seed: int, serve: Any) -> Figures:
    """One campaign on ``url``: ``rounds`` kills of each target; return the figures."""
    rng = random.Random(seed)
    figures = Figures(backend=url.split(":", 1)[0])
    kill_writers(url, folder, rounds, figures, rng)
    kill_importers(url, transcripts, rounds, figures, rng)
    kill_summary_workers(url, rounds, figures, rng, serve)
    kill_rebuilds(url, rounds, figures, rng)
    return figures


if __name__ == "__main__":
    if sys.argv[1] == "writer":
        writer(sys.argv[2], sys.argv[3], sys.argv[4], Path(sys.argv[5]))
    else:
        import tempfile

        sys.path.insert(0, str(HERE.parents[1] / "adapters" / "summarizers"))
        from loopback import serve as loopback_serve

        def _serve(*replies: dict[str, Any]) -> Any:
            from loopback import Reply  # noqa: PLC0415

            return loopback_serve(*(Reply(**r) for r in replies))

        with tempfile.TemporaryDirectory() as tmp:
            found = run(
                sys.argv[1],
                Path(tmp),
                HERE.parents[1] / "fixtures" / "transcripts",
                rounds=int(sys.argv[2]),
                seed=int(sys.argv[3]) if len(sys.argv) > 3 else 0,
                serve=_serve,
            )
        sys.stdout.write(json.dumps(found.as_dict(), indent=2) + "\n")
