"""A CLI rebuild after a config change counted in CPU instructions (callgrind), next to the raw floor's.

Usage::

    .venv/bin/python bench/rebuild_instructions.py [--copies 5] [--before REF]

Wall-clock ratios on a shared 2-vCPU machine move by 10-30 % between runs (ADR 0067), so a change that saves
3 % of a rebuild cannot be told from the noise by timing it. The number of instructions a run executes does
not move: callgrind gave the same total to 0.1 % across runs here, whatever else the machine was doing. This
counts, on bench_rebuild's ledger (every fixture transcript ``--copies`` times; another corpus with
``CONTEXTLEDGER_BENCH_TRANSCRIPTS``):

- ``raw``: the raw scan + decode of every event (``bench_rebuild.phase_raw``, the floor of every rebuild
  ratio) in a child of its own, less the same child stopping before its scan: the floor's own instructions;
- ``start-up``: the whole CLI rebuild of an empty ledger (interpreter, imports, typer, leases, exit);
- the CLI rebuild after a config change as bench_rebuild_cli runs it (``rebuild --policy threshold
  --workers 1 --json``, and the same with ``--no-compare``), on copies of what a first rebuild (``--policy
  default --switch``, not counted) left; every thread of the process is counted.

Each rebuild's **share** is raw's instructions over its own: the same events go through both, so it is what
events/s over raw events/s would read if every instruction took the same time. It does not: cache misses,
the GIL and a second core make time, not instructions, and under valgrind SHA-256 runs without the CPU's SHA
instructions. So the share tells whether a change does less work, to 0.1 %; the wall-clock benches still
tell how fast. ``--before REF`` counts the same CLI of git ``REF`` (assembled from ``git archive``) too.
Results land in ``bench/results/rebuild_instructions.json``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

KINDS = {
    "rebuild after a config change": ("--policy", "threshold"),
    "the same, --no-compare": ("--policy", "threshold", "--no-compare"),
}
"""The counted CLI rebuilds, each on a fresh copy of what the first rebuild left."""

FIRST = ("--policy", "default", "--switch")
"""The first rebuild (not counted): it counts every text, so the rebuilds counted read their counts."""


def totals(out: Path) -> int:
    """The instructions a callgrind output file counts in all (its ``totals:`` or ``summary:`` line)."""
    for line in out.read_text(encoding="utf-8").splitlines():
        if line.startswith(("totals:", "summary:")):
            return int(line.split()[1])
    msg = f"{out}: no totals line (did valgrind run to the end?)"
    raise ValueError(msg)


def counted(command: list[str], work: Path, env: dict[str, str]) -> int:
    """Run ``command`` under callgrind (every thread, not its children); the instructions it executed."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        msg = "valgrind is not installed (Debian: apt-get install valgrind)"
        raise RuntimeError(msg)
    out = work / "callgrind.out"
    out.unlink(missing_ok=True)
    done = subprocess.run(
        [valgrind, "--tool=callgrind", f"--callgrind-out-file={out}", *command],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    return totals(out)


def _code(pythonpath: str | None, base: Path, empty: Path, work: Path) -> dict[str, int]:
    """One code's counts: start-up on the empty ledger, then each ``KINDS`` rebuild on a fresh copy."""
    from bench_rebuild_cli import rebuild_command  # noqa: PLC0415
    from harness import child_env, copy_ledger  # noqa: PLC0415

    env = child_env(pythonpath)
    cold, warm = work / "cold.db", work / "warm.db"
    copy_ledger(base, cold)
    subprocess.run(rebuild_command(cold, *FIRST), check=True, capture_output=True, env=env)
    copy_ledger(empty, warm)
    found = {"start-up": counted(rebuild_command(warm, *KINDS["rebuild after a config change"]), work, env)}
    for kind, args in KINDS.items():
        copy_ledger(cold, warm)
        found[kind] = counted(rebuild_command(warm, *args), work, env)
    return found


def _raw(base: Path, work: Path) -> int:
    """The raw floor's own instructions: its child scanning, less the same child stopping before the scan."""
    from harness import child_env  # noqa: PLC0415

    env = child_env(None)
    child = [sys.executable, __file__, "--raw", str(base)]
    return counted([*child, "--scan"], work, env) - counted(child, work, env)


def table(events: int, raw: int, codes: dict[str, dict[str, int]]) -> list[str]:
    """Markdown rows: each count, per event, each rebuild's share (raw over it), whole and past start-up."""
    lines = [
        "| measurement | code | instructions | per event | raw / it |",
        "|---|---|---:|---:|---:|",
        f"| raw scan + decode (floor) | | {raw:,} | {raw / events:,.0f} | 100.0% |",
    ]
    for label, found in codes.items():
        start = found["start-up"]
        lines.append(f"| start-up (an empty ledger's rebuild) | {label} | {start:,} | | |")
        for kind in KINDS:
            whole = found[kind]
            lines.append(
                f"| {kind} | {label} | {whole:,} | {whole / events:,.0f} | {raw / whole:.1%} |"
            )  # fmt: skip
            beyond = whole - start
            lines.append(
                f"| … beyond start-up | {label} | {beyond:,} | {beyond / events:,.0f} | {raw / beyond:.1%} |"
            )  # fmt: skip
    if len(codes) == 2:  # before and after
        before, after = codes.values()
        lines += [f"| {kind}: after / before | | {after[kind] / before[kind]:.3f} | | |" for kind in KINDS]
    return lines


def main() -> None:
    """Build the ledger, count raw and each code's rebuilds, print and save the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=5)
    parser.add_argument("--before", default="", help="a git ref whose CLI is counted too")
    parser.add_argument("--raw", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--scan", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))
    if args.raw is not None:  # the child counted for raw: the same imports, with or without the scan
        from bench_rebuild import phase_raw  # noqa: PLC0415

        if args.scan:
            phase_raw(args.raw)
        return
    import contextledger  # noqa: PLC0415
    from bench_rebuild import build  # noqa: PLC0415
    from bench_scale import _package_of  # noqa: PLC0415
    from harness import save  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        base, empty = work / "base.db", work / "empty.db"
        events = build(base, args.copies)
        contextledger.open_ledger(f"sqlite:///{empty}").close()
        raw = _raw(base, work)
        labels: list[tuple[str, str | None]] = []
        if args.before:
            labels.append(("before", str(_package_of(args.before, work))))
        labels.append(("after", None))
        codes = {label: _code(path, base, empty, work) for label, path in labels}
    lines = table(events, raw, codes)
    corpus = os.environ.get("CONTEXTLEDGER_BENCH_TRANSCRIPTS", "fixtures")
    head = f"{events:,} events ({corpus} x{args.copies}); instructions counted by callgrind, every thread"
    text = "\n".join([head, "", *lines])
    found: dict[str, Any] = {"events": events, "corpus": corpus, "copies": args.copies, "raw": raw}
    path = save(
        "rebuild_instructions", {**found, "codes": codes, "before_ref": args.before, "markdown": text}
    )
    print(text)
    print(f"saved {path}")


if __name__ == "__main__":
    main()
