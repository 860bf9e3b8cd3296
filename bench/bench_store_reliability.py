"""Store reliability (issue 8): large PostgreSQL writes next to SQLite's, concurrent writers and opens.

Each large write runs in a fresh process that reports its own time and peak RSS (``ru_maxrss``); a run
that does not finish within 120 s counts as hung. Run: .venv/bin/python bench/bench_store_reliability.py
[--runs 20] [--appends 250] [--rounds 20] [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).parent))
from harness import PEAK_KIB, save

PG = "postgresql://postgres@127.0.0.1:5432/test"
WORKER = Path(__file__).resolve().parents[1] / "tests" / "adapters" / "store" / "store_workers.py"

CHILD = (
    PEAK_KIB
    + """
import sys, time
import contextledger
kind, url = sys.argv[1], sys.argv[2]
with contextledger.open_ledger(url) as ledger:
    s = ledger.start_session()
    start = time.perf_counter()
    if kind == "batch":
        ledger.append_many(s, [{"role": "user", "content": "u" * 4000}] * 2000)
    else:
        text = ("0123456789abcdef" * 4096 + "\\n") * 763
        ledger.add_assistant_message(s, tool_calls=[{"id": "c1", "name": "cat", "arguments": {}}])
        ledger.add_tool_result(s, "c1", text)
    seconds = time.perf_counter() - start
print(seconds, peak_kib() / 1024)
"""
)


def one_write(kind: str, url: str) -> tuple[float, float] | None:
    """Time (s) and peak RSS (MiB) of one large write in a new process; None when it hung or failed."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", CHILD, kind, url], check=False, capture_output=True, text=True, timeout=120
        )
    except subprocess.TimeoutExpired:
        return None
    if done.returncode != 0:
        print(done.stderr[-500:], file=sys.stderr)
        return None
    seconds, rss = done.stdout.split()
    return float(seconds), float(rss)


def fresh_schema() -> str:
    """A PostgreSQL URL naming a new schema (dropped by ``drop``)."""
    return f"{PG}?schema=bench_{uuid.uuid4().hex[:10]}"


def drop(url: str) -> None:
    """Drop a bench schema."""
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{url.partition("?schema=")[2]}" CASCADE')


def large_writes(runs: int) -> dict[str, Any]:
    """Medians of the 2,000 x 4,000-char batch and the 50 MB tool result on both databases."""
    out: dict[str, Any] = {}
    for backend in ("postgres", "sqlite"):
        for kind in ("batch", "blob50mb"):
            samples = []
            for _ in range(runs):
                with tempfile.TemporaryDirectory() as folder:
                    url = fresh_schema() if backend == "postgres" else f"sqlite:///{folder}/b.db"
                    try:
                        samples.append(one_write(kind, url))
                    finally:
                        if backend == "postgres":
                            drop(url)
            ok = [s for s in samples if s is not None]
            out[f"{backend}/{kind}"] = {
                "completed": f"{len(ok)} of {runs}",
                "median_s": round(statistics.median(s[0] for s in ok), 3) if ok else None,
                "max_s": round(max(s[0] for s in ok), 3) if ok else None,
                "median_peak_rss_mib": round(statistics.median(s[1] for s in ok), 1) if ok else None,
            }
            print(backend, kind, out[f"{backend}/{kind}"], flush=True)
    return out


def writers(url: str, sessions: int, appends: int, *, retry: bool) -> dict[str, Any]:
    """Four writer processes x ``appends`` on ``sessions`` sessions; outcome counts and stored events."""
    import contextledger  # noqa: PLC0415 - only the parent needs it

    with contextledger.open_ledger(url) as ledger:
        ids = [ledger.start_session(session_id=f"s{n}") for n in range(sessions)]
    flag = "1" if retry else "0"
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    str(WORKER),
                    "append",
                    url,
                    ids[w % sessions],
                    str(appends),
                    flag,
                    str(folder),
                    str(w),
                ]
            )
            for w in range(4)
        ]
        while len(list(folder.glob("ready-*"))) < 4:
            time.sleep(0.01)
        start = time.perf_counter()
        (folder / "go").touch()
        for proc in procs:
            proc.wait()
        seconds = time.perf_counter() - start
        results = [json.loads((folder / f"result-{w}.json").read_text()) for w in range(4)]
    with contextledger.open_ledger(url) as ledger:
        events = sum(ledger.version(s) - 1 for s in ids)
    return {
        "sessions": sessions,
        "retry": retry,
        "landed": sum(r["ok"] for r in results),
        "conflicts": sum(r["conflicts"] for r in results),
        "database_locked": sum(r["locked"] for r in results),
        "other_unavailable": sum(r["unavailable"] for r in results),
        "other_errors": sum(len(r["other"]) for r in results),
        "messages_stored": events,
        "seconds": round(seconds, 2),
    }


def concurrency(appends: int) -> list[dict[str, Any]]:
    """The writer figures on SQLite and PostgreSQL, one and four sessions, with and without retry."""
    rows = []
    for backend in ("sqlite", "postgres"):
        for sessions in (1, 4):
            for retry in (False, True):
                with tempfile.TemporaryDirectory() as folder:
                    url = fresh_schema() if backend == "postgres" else f"sqlite:///{folder}/c.db"
                    try:
                        row = {"backend": backend, **writers(url, sessions, appends, retry=retry)}
                    finally:
                        if backend == "postgres":
                            drop(url)
                rows.append(row)
                print(row, flush=True)
    return rows


def opens(rounds: int) -> dict[str, Any]:
    """Four processes open one schema at once, ``rounds`` times, on fresh and on existing schemas."""
    out = {}
    for case in ("fresh", "existing"):
        prefix = f"bench_open_{uuid.uuid4().hex[:8]}"
        pattern = f"{PG}?schema={prefix}_{{round}}" if case == "fresh" else f"{PG}?schema={prefix}"
        if case == "existing":
            import contextledger  # noqa: PLC0415

            contextledger.open_ledger(pattern).close()
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            procs = [
                subprocess.Popen(
                    [sys.executable, str(WORKER), "open", pattern, str(rounds), str(folder), str(w)]
                )
                for w in range(4)
            ]
            while len(list(folder.glob("ready-*"))) < 4:
                time.sleep(0.01)
            failures = []
            for r in range(rounds):
                (folder / f"go-{r}").touch()
                files = [folder / f"result-{r}-{w}.json" for w in range(4)]
                while not all(f.exists() for f in files):
                    time.sleep(0.01)
                failures += [json.loads(f.read_text()) for f in files if json.loads(f.read_text()) != "ok"]
            for proc in procs:
                proc.wait()
        with psycopg.connect(PG, autocommit=True) as conn:
            names = [f"{prefix}_{r}" for r in range(rounds)] if case == "fresh" else [prefix]
            for name in names:
                conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        out[case] = {
            "rounds": rounds,
            "opens": 4 * rounds,
            "failures": len(failures),
            "sample": failures[:3],
        }
        print(case, out[case], flush=True)
    return out


def main() -> None:
    """Measure and save bench/results/store_reliability.json."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--appends", type=int, default=250)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="3 runs, 50 appends, 3 rounds")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.appends, args.rounds = 3, 50, 3
    result = {
        "large_writes": large_writes(args.runs),
        "concurrent_writers": {
            "processes": 4,
            "appends_each": args.appends,
            "rows": concurrency(args.appends),
        },
        "concurrent_opens": opens(args.rounds),
    }
    name = "store_reliability-quick" if args.quick else "store_reliability"
    print(save(name, result))


if __name__ == "__main__":
    main()
