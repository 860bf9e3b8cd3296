"""`why` on a synthetic 1M-event session: build it (batched appends into SQLite), plant a fact, time `why`.

Usage::

    .venv/bin/python bench/bench_why.py [--events 1000000] [--runs 5] [--db /tmp/why.db]

The session is a coding-agent-like stream (a user turn, then steps of one call and its result); one
tool result in the middle carries a planted fact. Model calls are recorded with the default policy at
a few positions after it (a real agent records one per call; a few are enough to trace the fact).
Each `why` (by position, and by text) runs in a fresh process (bench/child.py is not used: the
child here times open + why); the figure is the median of ``--runs`` runs. Results land in
``bench/results/why.json``. Never run in CI.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import contextledger
from contextledger.application.audit.call_recorder import CallRecorder
from harness import save

FACT = "the staging database password rotates on Thursdays (ticket OPS-4471)"
WORDS = ["alpha", "beta", "gamma", "delta", "file", "path", "test", "error", "value", "module", "import"]


def _messages(start_call: int, count: int, *, planted: bool) -> list[dict[str, Any]]:
    """``count`` messages: a user turn, then (call, result) steps; ``planted`` puts the fact in one."""
    out: list[dict[str, Any]] = [{"role": "user", "content": "continue with the next failing test " * 3}]
    call = start_call
    while len(out) + 2 <= count:
        call += 1
        body = " ".join(WORDS[(call + i) % len(WORDS)] for i in range(60))
        if planted and len(out) == count // 2:
            body += "\n" + FACT
        out.append(
            {
                "role": "assistant",
                "content": "Let me check.",
                "tool_calls": [{"id": f"c{call}", "name": "read_file", "arguments": '{"path": "a.py"}'}],
            }
        )
        out.append({"role": "tool", "call_id": f"c{call}", "content": body})
    return out


def build(db: Path, events: int, batch: int = 5_000) -> dict[str, Any]:
    """Build the session in ``db``; return its id, the planted position and the build time."""
    started = time.perf_counter()
    with contextledger.open_ledger(f"sqlite:///{db}") as ledger:
        session = ledger.start_session(system_prompt="You are a coding agent.", model="bench")
        planted_at = 0
        call = 0
        while (version := ledger.version(session)) < events:
            plant = planted_at == 0 and version >= events // 2
            messages = _messages(call, min(batch - 1, events - version), planted=plant)
            call += (len(messages) - 1) // 2
            positions = ledger.append_many(session, messages)
            if plant:
                planted_at = next(
                    p for p, m in zip(positions, messages, strict=True) if FACT in str(m.get("content"))
                )
            if len(messages) < 3:  # a user message alone: the last event
                break
        return {
            "session": session,
            "events": ledger.version(session),
            "planted_at": planted_at,
            "build_s": round(time.perf_counter() - started, 1),
        }


def record_calls(db: Path, meta: dict[str, Any]) -> dict[str, Any]:
    """Record model calls (default policy, 16k, heuristic tokenizer) at a few results after the fact."""
    started = time.perf_counter()
    session, planted_at = meta["session"], meta["planted_at"]
    with contextledger.open_ledger(f"sqlite:///{db}") as ledger:
        renderer = contextledger.Renderer(ledger, tokenizer="heuristic")
        # Work around CachedTokenCounter clearing its memory in the middle of a batch (KeyError past
        # 200,000 distinct texts; reported): a limit above the session's distinct texts.
        renderer.counter._memory_limit = 4_000_000  # noqa: SLF001
        recorder = CallRecorder(ledger)
        policy = contextledger.get_preset("default")
        calls = 0
        for at in (planted_at + 1, planted_at + 11, planted_at + 201, planted_at + 2_001, meta["events"]):
            context = renderer.render(session, policy, at=at, budget=16_000)
            recorder.record(context, policy)
            calls += 1
    return {"calls": calls, "record_calls_s": round(time.perf_counter() - started, 1)}


CHILD = """
import sys, time, json
t0 = time.perf_counter()
import contextledger
from contextledger.application.audit.forensics import why
from contextledger.application.render.renderer import Renderer
t1 = time.perf_counter()
db, session, mode, arg = sys.argv[1:5]
with contextledger.open_ledger("sqlite:///" + db) as ledger:
    t2 = time.perf_counter()
    renderer = Renderer(ledger, tokenizer="heuristic")
    if mode == "position":
        answer = why(ledger, session, "", renderer=renderer, position=int(arg))
    else:
        answer = why(ledger, session, arg, renderer=renderer)
    t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "open_s": t2 - t1, "why_s": t3 - t2,
                  "verdict": answer.verdict, "entered_at": answer.entered_at}))
"""


def time_why(db: Path, session: str, mode: str, arg: str, runs: int) -> dict[str, Any]:
    """Run `why` ``runs`` times, each in a fresh process; return medians and the last verdict."""
    samples: list[dict[str, Any]] = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(db), session, mode, arg],
            capture_output=True,
            text=True,
            check=True,
        )
        sample = json.loads(done.stdout.strip().splitlines()[-1])
        sample["process_wall_s"] = time.perf_counter() - start
        samples.append(sample)
    result: dict[str, Any] = {
        key: round(statistics.median(s[key] for s in samples), 4)
        for key in ("why_s", "open_s", "import_s", "process_wall_s")
    }
    result["why_s_runs"] = [round(s["why_s"], 4) for s in samples]
    result["verdict"] = samples[-1]["verdict"]
    result["entered_at"] = samples[-1]["entered_at"]
    return result


def main() -> None:
    """Build (or reuse) the session, then time `why` by position and by text."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--db", type=Path, default=Path(tempfile.gettempdir()) / "contextledger-bench-why.db")
    parser.add_argument("--label", default="")
    args = parser.parse_args()
    meta_path = args.db.with_suffix(".json")
    if args.db.exists() and meta_path.exists():
        meta = json.loads(meta_path.read_text())
    else:
        args.db.unlink(missing_ok=True)
        meta = build(args.db, args.events)
        meta_path.write_text(json.dumps(meta))
    if "calls" not in meta:
        meta |= record_calls(args.db, meta)
        meta_path.write_text(json.dumps(meta))
    print("session", meta, flush=True)
    by_position = time_why(args.db, meta["session"], "position", str(meta["planted_at"]), args.runs)
    print("why --position", by_position, flush=True)
    # The first text query of a session builds its chunk word sketches (application/search/text_index.py)
    # from the log, once; later queries, in any process, load them.
    first_text = time_why(args.db, meta["session"], "text", "OPS-4471", 1)
    print("why TEXT, first query (builds the word sketches)", first_text, flush=True)
    by_text = time_why(args.db, meta["session"], "text", "OPS-4471", args.runs)
    print("why TEXT", by_text, flush=True)
    other = time_why(args.db, meta["session"], "text", "rotates on thursdays", args.runs)
    print("why TEXT (other words)", other, flush=True)
    path = save(
        "why",
        {
            "label": args.label,
            "session": meta,
            "position": by_position,
            "text_first": first_text,
            "text": by_text,
            "text_other": other,
        },
    )
    print(f"saved {path}")


if __name__ == "__main__":
    main()
