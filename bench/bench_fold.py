"""The fold alone (``Projector.fold``), before/after, on the inputs of a real rebuild; states compared.

Usage::

    .venv/bin/python bench/bench_fold.py [--copies 20] [--runs 5] [--rounds 3] [--before REF]

The ledger is bench_rebuild's (every fixture transcript ``--copies`` times, each copy's texts made
distinct). A first rebuild (``--policy default``) and a rebuild after a config change (``--policy
threshold``) run in process, with ``Projector.fold`` wrapped to keep each call's counted events and
starting state (4,508 calls over 138,860 events at 20 copies). Then, per policy, a process of each code
(``--before REF``, assembled from ``git archive``, and the working tree; ``--rounds`` rounds interleaved)
folds the same calls again ``--runs`` times and prints its fastest and median time, and the SHA-256 of
every resulting state's msgpack encoding: equal digests mean both codes fold every session to the same
state. Timed in process on the same inputs, this is far steadier than a whole rebuild through the CLI.
Results land in ``bench/results/fold.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pickle
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_rebuild import build
from bench_scale import _package_of
from harness import child_json, copy_ledger, save

POLICIES = ("default", "threshold")


def capture(db: Path, policy: str, out: Path) -> int:
    """Run ``contextledger rebuild --policy POLICY`` in process; pickle the inputs of each fold call."""
    from contextledger.cli import main as cli  # noqa: PLC0415 - the phase runs in its own process
    from contextledger.projections.fold import Projector  # noqa: PLC0415

    calls: list[tuple[list[Any], Any]] = []
    fold = Projector.fold

    def recording(self: Projector, events: Any, state: Any = None) -> Any:
        events = list(events)
        calls.append((events, None if state is None else state.copy()))
        return fold(self, events, state)

    Projector.fold = recording  # type: ignore[method-assign]
    sys.argv = [
        "contextledger",
        "rebuild",
        "--policy",
        policy,
        "--workers",
        "1",
        "--db",
        f"sqlite:///{db}",
        "--json",
    ]
    try:
        cli()
    except SystemExit as done:
        if done.code:
            raise
    out.write_bytes(pickle.dumps(calls))
    return len(calls)


def time_fold(db: Path, policy: str, calls_file: Path, runs: int) -> dict[str, Any]:
    """Fold the captured calls ``runs`` times (each from fresh copies of their states); times and digest."""
    import contextledger  # noqa: PLC0415
    import msgspec  # noqa: PLC0415
    from contextledger.application.render.renderer import Renderer  # noqa: PLC0415

    calls = pickle.loads(calls_file.read_bytes())  # noqa: S301 - our own file, written a moment ago
    times: list[float] = []
    with contextledger.open_ledger(f"sqlite:///{db}") as ledger:
        projector = Renderer(ledger).projector(policy)
        for _ in range(runs + 1):  # the first run counts the derived texts into the cache: not timed
            states = [None if state is None else state.copy() for _, state in calls]
            started = time.perf_counter()
            done = [projector.fold(events, state) for (events, _), state in zip(calls, states, strict=True)]
            times.append(time.perf_counter() - started)
    encode = msgspec.msgpack.Encoder().encode
    digest = hashlib.sha256()
    for state in done:
        digest.update(encode(state))
    events = sum(len(events) for events, _ in calls)
    return {"events": events, "calls": len(calls), "times": times[1:], "digest": digest.hexdigest()[:16]}


def _child(pythonpath: str | None, *args: str) -> dict[str, Any]:
    return child_json([__file__, *args], pythonpath)


def main() -> None:
    """Build the ledger, capture both policies' fold calls, time each code on them, print one table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=20)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", default="")
    parser.add_argument("--phase", choices=["capture", "time"])
    parser.add_argument("--db", type=Path)
    parser.add_argument("--policy")
    parser.add_argument("--calls", type=Path)
    args = parser.parse_args()
    if args.phase == "capture":
        print(json.dumps({"calls": capture(args.db, args.policy, args.calls)}))
        return
    if args.phase == "time":
        print(json.dumps(time_fold(args.db, args.policy, args.calls, args.runs)))
        return
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        db = work / "ledger.db"
        build(db, args.copies)
        old = str(_package_of(args.before, work)) if args.before else None
        labels = [("before", old)] if args.before else []
        labels.append(("after", None))
        results: dict[str, dict[str, list[dict[str, Any]]]] = {
            p: {label: [] for label, _ in labels} for p in POLICIES
        }
        for policy in POLICIES:  # default first: the first rebuild leaves what threshold's rebuild reads
            calls = work / f"{policy}.pkl"
            _child(None, "--phase", "capture", "--db", str(db), "--policy", policy, "--calls", str(calls))
            copy = work / f"{policy}.db"
            copy_ledger(db, copy)
            for index in range(args.rounds):
                for label, path in labels if index % 2 == 0 else labels[::-1]:
                    results[policy][label].append(
                        _child(
                            path,
                            "--phase",
                            "time",
                            "--db",
                            str(copy),
                            "--policy",
                            policy,
                            "--calls",
                            str(calls),
                            "--runs",
                            str(args.runs),
                        )
                    )
    lines = [
        "| policy | code | fold, s: fastest | median (min-max of rounds' medians) | states digest |",
        "|---|---|---:|---:|---|",
    ]
    for policy, codes in results.items():
        for label, rounds in codes.items():
            fastest = min(min(r["times"]) for r in rounds)
            medians = [statistics.median(r["times"]) for r in rounds]
            digests = sorted({r["digest"] for r in rounds})
            lines.append(
                f"| {policy} | {label} | {fastest:.3f} | {statistics.median(medians):.3f} "
                f"({min(medians):.3f}-{max(medians):.3f}) | {', '.join(digests)} |"
            )
    first = next(iter(next(iter(results.values())).values()))[0]
    print(f"{first['events']:,} events in {first['calls']:,} fold calls per policy\n")
    print("\n".join(lines))
    save("fold", results)


if __name__ == "__main__":
    main()
