"""Every figure of issue 22, before and after, from one command: a table of goals, then each bench's own.

Usage::

    .venv/bin/python bench/issue22.py --before REF [--quick] [--skip pg_writers ...]

Runs, one after the other and each in its own processes (the current code interleaved with git ``REF``'s
inside each bench, so every ratio is to a floor measured in the same run):

- ``scale``: ``BENCH_TURNS=1000 bench_scale.py --quick --before REF --only turn simulate append render
  import`` (turn cost at turns 1-50 vs 951-1,000 on memory and SQLite, simulate, batched append, warm
  render, import RSS);
- ``pg_writers``: ``bench_pg_writers.py --before REF --rounds 3 --per-writer 500`` (1, 4 and 16 writer
  processes vs raw INSERT + COMMIT,
  single append at 1k and 40k events, the load run with a following view);
- ``rebuild_cli``: ``bench_rebuild_cli.py --before REF`` (first rebuild vs tiktoken: the median of each run's
  ratio to a tiktoken run just before it; rebuild after a config change in one process vs the raw scan +
  decode).

``--quick`` gives the PostgreSQL and rebuild benches fewer rounds (for a smoke run; the figures of record use
the defaults). The summary reads the benches' result files back (``bench/results/{scale,pg_writers,
rebuild_cli}.json``), prints one Markdown table (goal, before, after, met) followed by each bench's table,
and writes it all to ``bench/results/issue22.md``. Its header names the code measured (the commit, "+changes"
when tracked files outside ``bench/results`` differ) and each bench's machine facts as it saved them
(``harness.machine``: processor, CPUs, memory, Python, the load when it ended), saying where a run ran.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
RESULTS = HERE / "results"

Row = list[Any]  # [section, measurement, median, min, max, unit, ratio text]
CODES = ("before", "after")


def _commands(before: str, quick: bool) -> dict[str, list[str]]:
    pg = (
        ["--rounds", "2", "--per-writer", "60", "--load", "20"]
        if quick
        else ["--rounds", "3", "--per-writer", "500"]  # with 100, one writer's timed run lasts ~50 ms: noise
    )
    runs = ["--runs", "1", "--copies", "5"] if quick else ["--runs", "3"]
    only = ["--only", "turn", "simulate", "append", "render", "import"]
    return {
        "scale": ["bench_scale.py", "--quick", "--before", before, *only],
        "pg_writers": ["bench_pg_writers.py", "--before", before, *pg, "--load-writers", "8"],
        "rebuild_cli": ["bench_rebuild_cli.py", "--before", before, *runs],
    }


def _load(results: Path, name: str) -> dict[str, Any]:
    path = results / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _find(rows: list[Row], section: str, start: str) -> Row | None:
    return next((r for r in rows if r[0] == section and str(r[1]).startswith(start)), None)


def _ratio(num: Row | None, den: Row | None) -> float | None:
    return None if num is None or den is None or not den[2] else float(num[2]) / float(den[2])


def _fmt(value: float | None, kind: str) -> str:
    """``x``: a multiple, ``%``: a fraction as a percentage, ``n``: a rate; n/a when not measured."""
    if value is None:
        return "n/a"
    return {"x": f"{value:.2f}x", "%": f"{100 * value:.1f} %", "n": f"{value:,.0f}"}[kind]


def _goal(label: str, pair: list[float | None], kind: str, ok: Callable[[float], bool]) -> list[str]:
    """One row of the goals table: label, before, after, whether the after figure meets the goal."""
    after = pair[1]
    met = "n/a" if after is None else ("met" if ok(after) else "NOT met")
    return [label, _fmt(pair[0], kind), _fmt(after, kind), met]


def _both(scale: dict[str, Any], figure: Callable[..., float | None], *args: str) -> list[float | None]:
    return [figure(scale[code], *args) for code in CODES]


def _turn_ratio(rows: list[Row], section: str, what: str) -> float | None:
    return _ratio(_find(rows, section, f"{what} at turns 951"), _find(rows, section, f"{what} at turns 1-50"))


def _calls_per_second(rows: list[Row], policy: str) -> float | None:
    return _median(_find(rows, "simulate", f"policy {policy}: "))


def _median(row: Row | None) -> float | None:
    return None if row is None else float(row[2])


def _times_the_file(row: Row | None) -> float | None:
    return None if row is None else float(str(row[6]).split("x", 1)[0])


def _scale_goals(scale: dict[str, Any]) -> list[list[str]]:
    if not scale:
        return []
    out: list[list[str]] = []
    for store in ("memory", "sqlite"):
        for what in ("turn", "request"):
            pair = _both(scale, _turn_ratio, f"turn/{store}", what)
            out.append(
                _goal(f"{what} at turns 951-1,000 / 1-50, {store} (<= 1.3)", pair, "x", lambda v: v <= 1.3)
            )
    for policy in ("default", "nexus"):
        pair = _both(scale, _calls_per_second, policy)
        out.append(_goal(f"simulate, policy {policy}, calls/s (>= 1,000)", pair, "n", lambda v: v >= 1000))
    pair = _both(
        scale, lambda r: _ratio(_find(r, "append", "ledger.append_many"), _find(r, "append", "raw sqlite3"))
    )
    out.append(_goal("batched append / raw executemany (>= 50 %)", pair, "%", lambda v: v >= 0.5))
    pair = _both(
        scale, lambda r: _ratio(_find(r, "render", "warm render"), _find(r, "render", "build + encode"))
    )
    out.append(_goal("warm render / raw build + encode (<= 2.5)", pair, "x", lambda v: v <= 2.5))
    pair = _both(scale, lambda r: _times_the_file(_find(r, "import", "peak RSS growth during the import (")))
    out.append(_goal("import peak RSS growth / file size, SQLite (<= 2)", pair, "x", lambda v: v <= 2))
    pair = _both(
        scale, lambda r: _times_the_file(_find(r, "import", "peak RSS growth during the import into"))
    )
    out.append(_goal("import peak RSS growth / file size, PostgreSQL (<= 2)", pair, "x", lambda v: v <= 2))
    return out


def _pg_goals(pg: dict[str, Any]) -> list[list[str]]:
    rows: list[Row] = pg.get("rows", [])
    if not rows:
        return []
    ratio = _ratio(
        _find(rows, "append", "single append @40,000"), _find(rows, "append", "single append @1,000")
    )
    out = [
        _goal("PostgreSQL single append @40k / @1k events (<= 1.3)", [None, ratio], "x", lambda v: v <= 1.3)
    ]
    for n in (1, 4, 16):
        raw = _find(rows, "writers", f"{n} raw INSERT")
        pair = [
            _ratio(_find(rows, "writers", f"{n} writer processes, one session each ({c})"), raw)
            for c in CODES
        ]
        out.append(
            _goal(f"PostgreSQL {n} writer processes / as many raw (>= 50 %)", pair, "%", lambda v: v >= 0.5)
        )
    load, raw = _find(rows, "load", "8 writers"), _find(rows, "load", "8 raw")
    if load is not None:
        p50, p99 = _median(_find(rows, "load", "view lag p50")), _median(_find(rows, "load", "view lag p99"))
        lag = f"{_fmt(_ratio(load, raw), '%')} of raw; view lag p50 {_fmt(p50, 'n')}, p99 {_fmt(p99, 'n')} ms"
        out.append(
            ["PostgreSQL load run, 8 writers: events/s (report)", "", f"{load[2]:,.0f} ({lag})", "report"]
        )
    return out


def _first_ratio(first: dict[str, Any], tiktoken_s: float) -> float:
    """The first rebuild's time over tiktoken's.

    The median of each run's ratio to the tiktoken run just before it when the bench paired them, else the
    median run over the median tiktoken run.
    """
    paired = first.get("paired_ratios")
    return statistics.median(paired) if paired else float(first["seconds"]) / tiktoken_s


def _warm_ratio(runs: list[dict[str, Any]], raw: float) -> float | None:
    """A rebuild after a config change's rate over raw's.

    The median of each run's ratio to the raw run just before it when the bench paired them, else the
    median rate over the median raw rate.
    """
    if not runs:
        return None
    if paired := [r["raw_ratio"] for r in runs if "raw_ratio" in r]:
        return statistics.median(paired)
    return statistics.median(r["events"] / r["seconds"] for r in runs) / raw


def _rebuild_goals(cli: dict[str, Any]) -> list[list[str]]:
    if not cli:
        return []
    raw = statistics.median(r["events_per_s"] for r in cli["raw"])
    tik = statistics.median(r["seconds"] for r in cli["tiktoken"])
    warm: list[float | None] = []
    first: list[float | None] = []
    for code in CODES:
        runs = cli.get(code) or {}
        warm.append(_warm_ratio(runs.get("warm", []), raw))
        first.append(_first_ratio(runs["first"], tik) if runs.get("first") else None)
    return [
        _goal("rebuild after a config change, one process / raw (>= 25 %)", warm, "%", lambda v: v >= 0.25),
        _goal("first rebuild / tiktoken alone on the same texts (<= 1.3)", first, "x", lambda v: v <= 1.3),
    ]


def _facts(facts: dict[str, Any]) -> str:
    """One line of a result file's machine facts (``harness.machine``; older files lack some)."""
    memory = facts.get("memory_gib")
    parts = [
        str(facts.get("cpu") or "processor not recorded"),
        f"{facts.get('cpus')} CPUs",
        *([f"{memory} GiB"] if memory else []),
        f"Python {facts.get('python')}",
        f"load {facts.get('load1')} at {facts.get('when')}",
        *([f"code `{facts['commit']}`"] if facts.get("commit") else []),
    ]
    return ", ".join(parts)


def summary(before: str, results: Path = RESULTS) -> str:
    """The goals table from the three result files in ``results``, then each bench's own table."""
    scale, pg, cli = (_load(results, name) for name in ("scale", "pg_writers", "rebuild_cli"))
    goals = _scale_goals(scale) + _pg_goals(pg) + _rebuild_goals(cli)
    results_of = (("scale", scale), ("pg_writers", pg), ("rebuild_cli", cli))
    recorded = [(name, data["machine"]) for name, data in results_of if isinstance(data.get("machine"), dict)]
    after = next((facts["commit"] for _, facts in recorded if facts.get("commit")), None)
    lines = [
        f"Before = `{before}`, after = the working tree" + (f" (`{after}`)." if after else "."),
        "",
        *[f"- `{name}`: {_facts(facts)}" for name, facts in recorded],
        *([""] if recorded else []),
        "| goal | before | after | |",
        "|---|---:|---:|---|",
    ]
    lines += [f"| {' | '.join(g)} |" for g in goals]
    for name, data in results_of:
        if data:
            lines += [
                "",
                f"`{name}` (before = `{data.get('before_ref', '')}`):",
                "",
                str(data.get("markdown", "")),
            ]
    return "\n".join(lines) + "\n"


def main() -> None:
    """Run the benches (unless skipped), then print and write the summary."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--before", required=True, help="a git ref (main at the start of the work)")
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a smoke run)")
    parser.add_argument("--skip", nargs="*", default=[], choices=["scale", "pg_writers", "rebuild_cli"])
    args = parser.parse_args()
    env = {**os.environ, "BENCH_TURNS": os.environ.get("BENCH_TURNS", "1000")}
    failed = []
    for name, command in _commands(args.before, args.quick).items():
        if name in args.skip:
            continue
        start = time.time()
        print(f"# {name}: {' '.join(command)}", file=sys.stderr, flush=True)
        done = subprocess.run(
            [sys.executable, str(HERE / command[0]), *command[1:]],
            env=env,
            check=False,
            stdout=subprocess.DEVNULL,
        )
        print(
            f"# {name}: exit {done.returncode} after {time.time() - start:.0f} s", file=sys.stderr, flush=True
        )
        if done.returncode:
            failed.append(name)
    text = summary(args.before)
    (RESULTS / "issue22.md").write_text(text)
    sys.stdout.write(text)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
