"""A/B of one CLI rebuild: two codes interleaved round by round; wall and CPU time of each process.

Usage::

    .venv/bin/python bench/bench_rebuild_ab.py --before REF [--rounds 10] [--mode no-compare|compare|first]

The ledger is bench_rebuild's (every fixture transcript ``--copies`` times). For ``no-compare`` and
``compare`` the current code first rebuilds it under the default policy (``--switch``); each round then
runs ``contextledger rebuild --policy threshold`` (with ``--no-compare`` or not) on a fresh copy of that
ledger. For ``first`` each round rebuilds a fresh copy of the imported ledger under the default policy.
Each round runs both codes, in alternating order, each in a process of its own (``bench_rebuild_cli._cli``:
wall time from outside, CPU time from the child's rusage). Same-code pairs on a shared 2-vCPU machine
spread by up to 15 % in their minima and about 1 % in their medians over 10 rounds: compare the medians.
Results land in ``bench/results/rebuild_ab.json``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench_rebuild import build
from bench_rebuild_cli import _cli, _has_no_compare, _stats
from bench_scale import _package_of
from harness import copy_ledger, save


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
            _cli(None, source, "--policy", "default", "--switch")  # the ledger a config change starts from
            quick = ("--no-compare",) if args.mode == "no-compare" else ()
            rebuild_args = ("--policy", "threshold", *quick)
        for _, path in codes:
            _has_no_compare(path)  # compiles each code's modules before the first timed run
        runs: dict[str, list[tuple[float, float]]] = {label: [] for label, _ in codes}
        copy = work / "copy.db"
        for index in range(args.rounds):
            for label, path in codes if index % 2 == 0 else codes[::-1]:
                copy_ledger(source, copy)  # written to disk first: not during the run
                done = _cli(path, copy, *rebuild_args)
                runs[label].append((done["seconds"], done["cpu_seconds"]))
                copy.unlink()
            print(f"# round {index + 1} done", file=sys.stderr, flush=True)
    result: dict[str, Any] = {"events": events, "mode": args.mode, "before_ref": args.before}
    result["rounds"] = args.rounds
    head = f"{events:,} events; rebuild {' '.join(rebuild_args)}; {args.rounds} rounds, the codes interleaved"
    lines = [head, "", "| code | wall s, median (min-max) | CPU s, median (min-max) |", "|---|---|---|"]
    for label, measured in runs.items():
        wall, cpu = _stats([w for w, _ in measured]), _stats([c for _, c in measured])
        result[label] = {"wall": wall, "cpu": cpu, "runs": measured}
        cells = [f"{m:.2f} ({low:.2f}-{high:.2f})" for m, low, high in (wall, cpu)]
        lines.append(f"| {label} | {cells[0]} | {cells[1]} |")
    result["markdown"] = "\n".join(lines)
    path = save("rebuild_ab", result)
    print(result["markdown"])
    print(f"saved {path}")


if __name__ == "__main__":
    main()
