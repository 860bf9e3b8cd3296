"""Where a CLI rebuild after a config change spends its main thread's time, sampled by py-spy, part by part.

Usage::

    .venv/bin/python bench/rebuild_profile.py [--copies 20] [--runs 3] [--rate 500]

Needs py-spy (the ``bench`` extra: ``pip install -e ".[bench]"``), allowed to trace the child it starts
(ptrace: some containers forbid it). The ledger is bench_rebuild's (every fixture transcript ``--copies``
times; another corpus with ``CONTEXTLEDGER_BENCH_TRANSCRIPTS``). A first rebuild (``rebuild --policy default
--switch``) runs once, unsampled; then, ``--runs`` times on a fresh copy of what it left, the rebuild after
a config change as bench_rebuild_cli runs it (``rebuild --policy threshold --workers 1 --json``) runs under
``py-spy record --rate RATE --format raw``: every sample is one thread's Python stack, taken from outside
the process (no probe, no profiler hook: the figures are the CLI's own).

The main thread's samples (the stacks from ``<module>``: the CLI runs as ``python -c``) are attributed to
the first of ``PARTS`` whose test the stack passes, so the parts add up to the whole: the raw floor's own
work (the fetch and the msgspec decode), start-up and exit, tiktoken counting the new policy's cards, the
policy's fold, the card facts rows, the batch split by session and counted (since ADR 0074 this holds the
batch's own loop, which was in the rest), the states freed at their heads, the catch-up's own loop (mostly
the freeing of each folded batch), row encoding, render digests, the comparison, the reads ahead, the rest of
the reads, and the rest. It prints each part's median share over the runs (min-max) and the runs' wall times.

py-spy pauses the process for each sample (its default), so a sampled run takes about twice as long as one
alone; the shares agreed with ``rebuild_phases.py --parts``, whose probes time the same parts. With
``--nonblocking`` the run kept its pace but a sample taken while Python code ran was often lost, so the
shares leaned towards the C calls (the raw floor's work read 23 % of the samples instead of 14 %): it is not
used. At 500 Hz a rebuild of the fixtures x20 gives ~6,000 main-thread samples; a share still moves by a few
points from run to run (the raw floor's read 12-18 % over three runs), so read the medians. Results land in
``bench/results/rebuild_profile.json``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

from bench_rebuild import build
from bench_rebuild_cli import rebuild_command
from harness import copy_ledger, save

Test = Callable[[str], bool]
"""Whether a sample's stack (frames joined by ``;``, outermost first) belongs to a part."""


def _has(*names: str) -> Test:
    """One of ``names`` is in the stack (``"Projector.fold ("`` names a frame, ``"CardFacts."`` a class)."""
    return lambda stack: any(name in stack for name in names)


def _leaf(name: str) -> Test:
    """The sample's innermost frame is ``name`` itself (its own lines, and what they free)."""
    return lambda stack: stack.rsplit(";", 1)[-1].startswith(f"{name} (")


PARTS: list[tuple[str, Test]] = [
    (
        "the raw floor's own work: fetch and decode",
        _has("notification_rows (", "notification_scan (", "MsgspecMapper.decode"),
    ),
    (
        "start-up and exit: imports, typer, opening the ledger, leases",
        lambda stack: "_catch_up (" not in stack and "compare_versions (" not in stack,
    ),
    ("tiktoken counting the new policy's cards", _has("fit_card (")),
    ("the policy's fold", _has("Projector.fold (")),
    ("card facts: rows read and attached", _has("CardFacts.", "BatchFacts.")),
    ("a batch split by session and counted", _has("ContextView._split (", "ContextView._counted (")),
    ("states freed at their heads", _has("ContextView._release_at_head (")),
    ("the catch-up's own loop (mostly freeing each folded batch)", _leaf("ViewRunner._catch_up")),
    ("row encoding", _has("encode_row (")),
    ("render digests", _has("ContextView._add_digest (")),
    ("the comparison", _has("compare_versions (")),
    ("reads ahead", _has("ContextView.ahead (")),
    ("the rest of the reads (notifications built)", _has("read_batch (")),
]
"""Each part of the main thread's time: its test of a stack (frames joined by ``;``); first match wins."""

REST = "the rest"
"""The part of the main thread's samples that no part of ``PARTS`` holds."""


def attribute(lines: Iterable[str]) -> Counter[str]:
    """Samples per part of py-spy's raw output (``frame;frame;... count`` lines), main thread only."""
    found: Counter[str] = Counter()
    for line in lines:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not stack.startswith("<module> ") or not count.isdigit():
            continue  # another thread's stack (or a blank line)
        part = next((name for name, test in PARTS if test(stack)), REST)
        found[part] += int(count)
    return found


def _sampled(db: Path, out: Path, rate: int) -> float:
    """Run the rebuild after a config change under py-spy; its wall time (py-spy's start-up included)."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    command = [spy, "record", "--rate", str(rate), "--format", "raw", "--output", str(out), "--"]
    started = time.perf_counter()
    subprocess.run(
        [*command, *rebuild_command(db, "--policy", "threshold")], check=True, capture_output=True, text=True
    )
    return time.perf_counter() - started


def main() -> None:
    """Build the ledger, run a first rebuild, sample ``--runs`` later ones, print the parts."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rate", type=int, default=500, help="samples per second")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        base, cold, warm = work / "base.db", work / "cold.db", work / "warm.db"
        events = build(base, args.copies)
        copy_ledger(base, cold)
        subprocess.run(
            rebuild_command(cold, "--policy", "default", "--switch"), check=True, capture_output=True
        )
        seconds: list[float] = []
        counts: list[Counter[str]] = []
        for index in range(args.runs):
            copy_ledger(cold, warm)
            raw = work / f"samples-{index}.txt"
            seconds.append(_sampled(warm, raw, args.rate))
            counts.append(attribute(raw.read_text().splitlines()))
            total = sum(counts[-1].values())
            print(f"# run {index + 1}: {seconds[-1]:.2f} s, {total:,} main-thread samples", file=sys.stderr)
    lines = [
        f"{events:,} events; rebuild after a config change under py-spy at {args.rate} Hz: "
        + ", ".join(f"{s:.2f}" for s in seconds)
        + " s",
        "",
        "| part of the main thread | share, median (min-max) |",
        "|---|---:|",
    ]
    for name in [*(name for name, _ in PARTS), REST]:
        shares = [100 * found[name] / max(1, sum(found.values())) for found in counts]
        lines.append(f"| {name} | {statistics.median(shares):.1f} % ({min(shares):.1f}-{max(shares):.1f}) |")
    text = "\n".join(lines)
    runs = [{"seconds": s, "parts": dict(found)} for s, found in zip(seconds, counts, strict=True)]
    path = save("rebuild_profile", {"events": events, "rate": args.rate, "runs": runs, "markdown": text})
    print(text)
    print(f"saved {path}")


if __name__ == "__main__":
    main()
