"""A/B of one CLI rebuild: two codes interleaved round by round; wall and CPU time of each process.

Usage::

    .venv/bin/python bench/bench_rebuild_ab.py --before REF [--rounds 10] [--mode no-compare|compare|first]

The ledger is bench_rebuild's (every fixture transcript ``--copies`` times). For ``no-compare`` and
``compare`` the current code first rebuilds it under the default policy (``--switch``); each round then
runs ``contextledger rebuild --policy threshold`` (with ``--no-compare`` or not) on a fresh copy of that
ledger. For ``first`` each round rebuilds a fresh copy of the imported ledger under the default policy.
Each round runs both codes, in alternating order, each in a process of its own: the wall time is taken
from outside, the CPU time (user + system) from ``wait4``. Same-code pairs on a shared 2-vCPU machine
spread by up to 15 % in their minima and about 1 % in their medians over 10 rounds: compare the medians.
Results land in ``bench/results/rebuild_ab.json``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_rebuild import build
from bench_scale import _package_of
from harness import child_env, save

_CLI = ("-c", "from contextledger.cli import main; main()", "rebuild")


def _run(pythonpath: str | None, db: Path, *args: str) -> tuple[float, float]:
    """One CLI rebuild in a fresh process: its wall time and its CPU time (user + system)."""
    command = [sys.executable, *_CLI, *args, "--workers", "1", "--db", f"sqlite:///{db}", "--json"]
    started = time.perf_counter()
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=child_env(pythonpath)
    )
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    assert process.stderr is not None
    error = process.stderr.read().decode()
    process.stderr.close()
    if status != 0:
        raise RuntimeError(error[-2000:])
    return wall, usage.ru_utime + usage.ru_stime


def _stats(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main() -> None:
    """Build the ledger, run the rebuild of ``--mode`` under both codes, interleaved; print the medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the git ref compared with the working tree")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--copies", type=int, default=20)
    parser.add_argument("--mode", choices=["no-compare", "compare", "first"], default="no-compare")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        source = work / "imported.db"
        events = build(source, args.copies)
        codes = [("before", str(_package_of(args.before, work))), ("after", None)]
        if args.mode == "first":
            rebuild_args: tuple[str, ...] = ("--policy", "default", "--switch")
        else:
            _run(None, source, "--policy", "default", "--switch")  # the ledger a config change starts from
            quick = ("--no-compare",) if args.mode == "no-compare" else ()
            rebuild_args = ("--policy", "threshold", *quick)
        for _, path in codes:  # compiles each code's modules before the first timed run
            help_command = [sys.executable, *_CLI, "--help"]
            subprocess.run(help_command, env=child_env(path), capture_output=True, check=True)
        runs: dict[str, list[tuple[float, float]]] = {label: [] for label, _ in codes}
        copy = work / "copy.db"
        for index in range(args.rounds):
            for label, path in codes if index % 2 == 0 else codes[::-1]:
                shutil.copy(source, copy)
                os.sync()  # the copy's dirty pages are not written back during the run
                runs[label].append(_run(path, copy, *rebuild_args))
                copy.unlink()
            print(f"# round {index + 1} done", file=sys.stderr, flush=True)
    result: dict[str, Any] = {"events": events, "mode": args.mode, "before_ref": args.before}
    result["rounds"] = args.rounds
    head = f"{events:,} events; rebuild {' '.join(rebuild_args)}; {args.rounds} rounds, the codes interleaved"
    lines = [head, ""]
    lines += ["| code | wall s, median (min-max) | CPU s, median (min-max) |", "|---|---|---|"]
    for label, measured in runs.items():
        wall, cpu = _stats([w for w, _ in measured]), _stats([c for _, c in measured])
        result[label] = {"wall": wall, "cpu": cpu, "runs": measured}
        lines.append(
            f"| {label} | {wall['median']:.2f} ({wall['min']:.2f}-{wall['max']:.2f}) "
            f"| {cpu['median']:.2f} ({cpu['min']:.2f}-{cpu['max']:.2f}) |"
        )
    result["markdown"] = "\n".join(lines)
    path = save("rebuild_ab", result)
    print(result["markdown"])
    print(f"saved {path}")


if __name__ == "__main__":
    main()
