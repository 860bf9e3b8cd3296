"""Run every benchmark script, each in its own process; collect bench/results/*.json and summarise.

Run: .venv/bin/python bench/run_all.py [--full] [--only NAME ...]

Fast mode (the default) passes each script its quick flags; ``--full`` runs the full sizes. A script
that fails is reported (with the tail of its output) and the others still run; the exit status is 1
when any failed. Each script writes its own result file; the summary table reads them back.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
RESULTS = HERE / "results"

SCRIPTS: dict[str, tuple[list[str], list[str]]] = {
    "bench_append.py": (["--quick"], []),
    "bench_render.py": (["--quick"], []),
    "bench_policies.py": ([], []),  # every budget (16k, 32k, 64k) even in fast mode: about a minute
    "bench_report.py": (["--runs", "3"], ["--runs", "5"]),  # 500 calls, 5 MB, in headless chromium
    "bench_retention.py": (["--quick"], []),  # 2 sessions x 120 calls fast; 4 x 300 with --full
    # PostgreSQL writers (table in its result file): 1 and 4 processes, one round, a 10 s load run fast
    "bench_pg_writers.py": (["--quick", "--writers", "1", "4", "--rounds", "1", "--load", "10"], []),
    "bench_rebuild_cli.py": (["--copies", "3", "--runs", "1"], ["--runs", "3"]),  # the CLI rebuild end to end
    "bench_long_session.py": (["--sizes", "5000,20000", "--runs", "1"], []),  # one session, folded anew
}
"""Each known script with its (fast, full) arguments; other bench_*.py scripts run only with --full."""

RESULT_OF = {
    "bench_append.py": "append",
    "bench_render.py": "render",
    "bench_policies.py": "policies",
    "bench_report.py": "report",
    "bench_retention.py": "retention",
    "bench_pg_writers.py": "pg_writers",
    "bench_rebuild_cli.py": "rebuild_cli",
    "bench_long_session.py": "long_session",
}


def _scripts(full: bool, only: list[str]) -> list[tuple[str, list[str]]]:
    found = sorted(p.name for p in HERE.glob("bench_*.py"))
    chosen = []
    for name in found:
        if only and name.removeprefix("bench_").removesuffix(".py") not in only and name not in only:
            continue
        if name in SCRIPTS:
            chosen.append((name, SCRIPTS[name][1] if full else SCRIPTS[name][0]))
        elif full:
            chosen.append((name, []))
        else:
            print(f"skip {name}: not in run_all.SCRIPTS, runs with --full only")
    return chosen


def _summary(name: str) -> list[str]:
    """A few headline figures from a script's result file."""
    path = RESULTS / f"{RESULT_OF.get(name, name.removeprefix('bench_').removesuffix('.py'))}.json"
    if not path.exists():
        return [f"  (no result file {path.name})"]
    data: dict[str, Any] = json.loads(path.read_text())
    lines = []
    if name == "bench_append.py":
        for size, f in data["single_append"].items():
            cold = f.get("new_process_first_append", {})
            lines.append(
                f"  append @{size}: p50 {f['p50_ms']:.2f} ms; new process: op {cold.get('op_ms', 0):.1f} ms, "
                f"whole process {cold.get('process_wall_ms', 0):.0f} ms"
            )
    elif name == "bench_render.py":
        for row in data["latency"]:
            child = row["new_process_render"]
            lines.append(
                f"  render {row['events']} ev @{row['budget']}: warm p50 {row['warm_p50_ms']:.2f} ms, "
                f"append+render p50 {row['append_render_p50_ms']:.2f} ms; new process render+encode "
                f"{child['op_ms']:.1f} ms (floor {row['new_process_floor']['op_ms']:.1f} ms), "
                f"whole process {child['process_wall_ms']:.0f} ms"
            )
    elif name == "bench_policies.py":
        for budget, rows in data["budgets"].items():
            lines.extend(
                f"  @{budget} {r['policy']:>22}: H {r['H_anthropic']:.3f} C {r['C_ratio_anthropic']:.3f} "
                f"breaks {r['prefix_breaks']} over {r['over_budget']} orphans {r['orphaned_calls']} "
                f"failed {r['failed_sessions']}"
                for r in rows
            )
    elif name == "bench_report.py":
        opened, floor = data["first_render_in_page"], data["floor_parse_only_in_page"]
        lines.append(
            f"  report of {data['calls']} calls, {data['content_bytes'] / 1e6:.1f} MB: first render median "
            f"{opened['median_ms']} ms ({opened['min_ms']}-{opened['max_ms']}), "
            f"floor {floor['median_ms']} ms, "
            f"ratio {data['ratio_to_floor']}x; switch call {data['switch_call_median_ms']} ms"
        )
    elif name == "bench_retention.py":
        lines.extend(
            f"  @{r['budget']} {r['policy']:>23} {r['mode']:>5}: constraints at last {r['constraints_last']} "
            f"todo {r['todo_latest'] if r['todo_latest'] is None else round(r['todo_latest'], 3)} "
            f"H {r['H']:.3f} over {r['over_budget']} orphans {r['orphans']}"
            for r in data["rows"]
        )
    else:  # a script that prints its own table keeps it as "markdown" (bench_rebuild_cli)
        lines.extend(f"  {line}" for line in data.get("markdown", f"{path.name} written").splitlines())
    return lines


def main() -> None:
    """Run the scripts one after the other and print a summary."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--full", action="store_true", help="full sizes and samples (slow)")
    parser.add_argument("--only", nargs="*", default=[], help="script names, e.g. render policies")
    args = parser.parse_args()
    outcomes: list[tuple[str, int, float]] = []
    for name, extra in _scripts(args.full, args.only):
        command = [sys.executable, str(HERE / name), *extra]
        print(f"== {' '.join([name, *extra])}", flush=True)
        start = time.perf_counter()
        done = subprocess.run(command, check=False, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        sys.stdout.write(done.stdout)
        if done.returncode != 0:
            sys.stdout.write(done.stderr[-3000:])
        outcomes.append((name, done.returncode, seconds))
    print("\n== summary")
    print("| script | status | seconds |\n|---|---|---|")
    for name, code, seconds in outcomes:
        print(f"| {name} | {'ok' if code == 0 else f'FAILED ({code})'} | {seconds:.0f} |")
    for name, code, _ in outcomes:
        if code == 0:
            print(name)
            print("\n".join(_summary(name)))
    sys.exit(1 if any(code for _, code, _ in outcomes) else 0)


if __name__ == "__main__":
    main()
