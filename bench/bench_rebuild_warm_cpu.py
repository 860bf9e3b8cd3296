"""CPU seconds of a rebuild after a config change through the CLI, before/after, vs raw scan + decode.

Usage::

    .venv/bin/python bench/bench_rebuild_warm_cpu.py [--copies 20] [--runs 5] [--before main]

On a loaded shared machine wall times do not repeat, so every figure is CPU seconds (user + sys from the
rusage of each child process). The ledger is bench_rebuild's (every fixture transcript ``--copies``
times). For each code (``--before`` REF, assembled from ``git archive``, and the working tree) the
first rebuild (``rebuild --policy default --switch --workers 1``) runs once; then the rebuild after a
config change (``--policy threshold`` on a fresh copy of what the first left, start-up, comparison and
exit included) alternates between the two codes with the raw floor: bench_rebuild's ``phase_raw``
(select every stored event and decode it), its loop timed with ``process_time`` in a process of its own.
The ratio is the rebuild's events per CPU second over the floor's.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_rebuild import build
from bench_scale import _package_of
from harness import copy_ledger

_RAW = """
import sys, time
sys.path.insert(0, {bench!r})
from pathlib import Path
from bench_rebuild import phase_raw
started = time.process_time()
done = phase_raw(Path(sys.argv[1]))
print(done["events"], time.process_time() - started)
"""


def _child(command: list[str], pythonpath: str | None) -> tuple[float, str]:
    """Run a child process; return its CPU seconds (user + sys) and what it printed."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise RuntimeError(done.stderr[-2000:])
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, done.stdout


def _rebuild(pythonpath: str | None, db: Path, *args: str) -> float:
    cli = [sys.executable, "-c", "from contextledger.cli import main; main()", "rebuild", *args]
    return _child([*cli, "--workers", "1", "--db", f"sqlite:///{db}", "--json"], pythonpath)[0]


def main() -> None:
    """Build the ledger, run the first rebuilds, then alternate the warm rebuilds with the raw floor."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=20)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--before", default="main")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp())
    try:
        base = work / "base.db"
        events = build(base, args.copies)
        codes = {"before": str(_package_of(args.before, work)), "after": None}
        cold: dict[str, Path] = {}
        for label, pythonpath in codes.items():
            cold[label] = work / f"{label}-cold.db"
            copy_ledger(base, cold[label])
            _rebuild(pythonpath, cold[label], "--policy", "default", "--switch")
        cpu: dict[str, list[float]] = {"raw": [], "before": [], "after": []}
        raw = [sys.executable, "-c", _RAW.format(bench=str(Path(__file__).parent)), str(base)]
        for run in range(args.runs):
            cpu["raw"].append(float(_child(raw, None)[1].split()[1]))
            for label, pythonpath in codes.items() if run % 2 == 0 else reversed(codes.items()):
                warm = work / "warm.db"
                copy_ledger(cold[label], warm)
                cpu[label].append(_rebuild(pythonpath, warm, "--policy", "threshold"))
                warm.unlink()
            print(run, os.getloadavg(), file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work)
    raw_s = statistics.median(cpu["raw"])
    print(f"{events:,} events; load average at the end {os.getloadavg()[0]:.1f}")
    print("| code | CPU s, median (min-max) | events per CPU s | of raw |")
    print("|---|---|---|---|")
    for label in ("raw", "before", "after"):
        values = cpu[label]
        median = statistics.median(values)
        share = f"{raw_s / median:.1%}" if label != "raw" else "100 %"
        spread = f"{min(values):.2f}-{max(values):.2f}"
        print(f"| {label} | {median:.2f} ({spread}) | {events / median:,.0f} | {share} |")
    print(f"after / before CPU: {statistics.median(cpu['after']) / statistics.median(cpu['before']):.2f}")


if __name__ == "__main__":
    main()
