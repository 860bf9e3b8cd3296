"""A long session folded from scratch under a tight budget: the cost per event at 20k, 40k and 80k events.

Usage::

    .venv/bin/python bench/bench_long_session.py [--sizes 20000,40000,80000] [--runs 3] [--budget 16000]
        [--before REF]

Each size is one session of bench_why's coding-agent stream (a user turn, then steps of one call and its
result; varied, distinct texts), built once into its own SQLite ledger. A run copies that ledger
(``copy_ledger``, nothing folded or counted in it) and renders the session's head in a fresh process with the
default policy, the heuristic tokenizer and ``--budget``: every event is read, counted and folded, and a
16k budget compacts every few dozen events, each compaction refreshing the session-state card. The figure is
the render's time over the session's events (µs an event), and the ratio of the largest size's to the
smallest's: a fold whose work per compaction grows with the session reads above 1 (goal: flat, <= 1.3, as
for turns). ``--before REF`` runs the same processes on the package as it was at git REF (``git archive``),
interleaved run by run. Results land in ``bench/results/long_session.json``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench_scale import _package_of
from bench_why import Texts, build
from harness import child_json, copy_ledger, machine, save

CHILD = """
import json, sys, time
import contextledger
db, budget = sys.argv[1], int(sys.argv[2])
with contextledger.open_ledger(f"sqlite:///{db}") as ledger:
    session = ledger.sessions()[0].session_id
    head = ledger.version(session)
    renderer = contextledger.Renderer(ledger, tokenizer="heuristic")
    policy = contextledger.get_preset("default")
    started = time.perf_counter()
    context = renderer.render(session, policy, at=head, budget=budget)
    seconds = time.perf_counter() - started
    assert context.tokens <= context.budget
print(json.dumps({"events": head, "seconds": seconds}))
"""


def _render(db: Path, budget: int, pythonpath: str | None) -> dict[str, float]:
    return child_json(["-c", CHILD, str(db), str(budget)], pythonpath)


def _table(codes: dict[str, dict[int, list[dict[str, float]]]], sizes: list[int]) -> str:
    rows = [
        "| code | events | render from scratch, s | µs an event | / the smallest size's |",
        "|---|---:|---:|---:|---|",
    ]
    for code, by_size in codes.items():
        base = None
        for size in sizes:
            runs = by_size[size]
            seconds = [r["seconds"] for r in runs]
            per_event = statistics.median(s / r["events"] * 1e6 for s, r in zip(seconds, runs, strict=True))
            base = per_event if base is None else base
            ratio = "" if size == sizes[0] else f"{per_event / base:.2f}x (goal <= 1.3)"
            rows.append(
                f"| {code} | {int(runs[0]['events']):,} | {statistics.median(seconds):.2f} "
                f"({min(seconds):.2f}-{max(seconds):.2f}) | {per_event:.1f} | {ratio} |"
            )
    return "\n".join(rows)


def main() -> None:
    """Build each size once, render each from scratch ``--runs`` times per code, print and save the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20000,40000,80000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--budget", type=int, default=16_000)
    parser.add_argument("--before")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        paths: dict[str, str | None] = {"after": None}
        if args.before:
            (folder / "before").mkdir()
            paths = {"before": str(_package_of(args.before, folder / "before")), "after": None}
        ledgers = {}
        for size in sizes:
            ledgers[size] = folder / f"session_{size}.db"
            build(ledgers[size], size, Texts())
            print(f"# built {size:,} events", file=sys.stderr)
        codes: dict[str, dict[int, list[dict[str, float]]]] = {code: {s: [] for s in sizes} for code in paths}
        run_db = folder / "run.db"
        for run in range(args.runs):
            for size in sizes:
                for code, pythonpath in paths.items():
                    copy_ledger(ledgers[size], run_db)
                    codes[code][size].append(_render(run_db, args.budget, pythonpath))
            print(f"# run {run + 1} done", file=sys.stderr)
    table = _table(codes, sizes)
    facts = machine()
    print(table)
    payload: dict[str, Any] = {
        "sizes": sizes,
        "budget": args.budget,
        "before_ref": args.before,
        **codes,
        "markdown": table,
        "machine": facts,
    }
    print(f"saved {save('long_session', payload)}", file=sys.stderr)


if __name__ == "__main__":
    main()
