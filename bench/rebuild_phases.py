"""Where a CLI rebuild's time goes: start-up, catch-up, what follows, and each thread's CPU.

Usage::

    .venv/bin/python bench/rebuild_phases.py [--copies 20] [--runs 3]

The ledger is bench_rebuild's (every fixture transcript ``--copies`` times; another corpus with
``CONTEXTLEDGER_BENCH_TRANSCRIPTS``). Each run is the CLI as bench_rebuild_cli runs it, in a fresh process:
a first rebuild (``rebuild --policy default --switch --workers 1 --json`` on a fresh copy), then a rebuild
after a config change (``--policy threshold`` on a copy of what the first left). The child wraps four
functions with probes (``--probe``) before it runs the CLI's ``main``:

- ``ViewRunner._catch_up``: when the catch-up starts and ends (wall clock, so the parent's spawn time
  and the child's marks share one clock);
- ``TiktokenCounter._count_joined``: the tokenizer thread's calls (the encoding's load is in its first),
  their CPU time and wall time (wall above CPU: the thread waited for the GIL or for a core);
- the work each ``Aside`` runs: the writes set aside (each batch's commit, the token-count writes), their CPU
  and wall;
- an exit handler: when the exit starts, the main thread's and the process's CPU time.

Per kind, medians over the runs (min-max) of: start-up (spawn to catch-up), the catch-up, the rest of the
command (catch-up end to the exit handlers), the exit (to the process gone, timed from outside), and the
CPU of each thread. With the raw scan + decode and tiktoken's own time over the same texts (each in a
process of its own, as bench_rebuild_cli measures them), it prints what each part weighs against the goals
of issue 22: the catch-up alone as a share of raw, and the tokenizer thread's time against tiktoken's.
Results land in ``bench/results/rebuild_phases.json``. A probe costs a few microseconds per call wrapped
(about 130 calls a run): the figures are the CLI's, not a profiler's.

``--parts`` also splits the rebuild after a config change into the parts its catch-up and comparison run on
the main thread (``PARTS``: the reads, the counts, the policy's fold, each session's row, its render digest,
the release of the states folded to their heads, the comparison, and what is left of each batch's loop),
in runs of their own: those probes wrap calls made once per session (about 4,500 a run on the fixtures
x20), a few microseconds each. With them, the table shows what a rebuild at 25 % of raw may spend in all
(``budget at 25 %``), next to what each part spends now and what the raw floor itself takes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

KINDS = {
    "first rebuild": ("--policy", "default", "--switch"),
    "rebuild after a config change": ("--policy", "threshold"),
}


_VIEW = "contextledger.application.rebuild.context_view"
SPLIT = "a batch split by session, counted from its token rows"
COUNTED = "the rest counted, card facts per message"
_STORE = "contextledger.adapters.store.projections"
PARTS = (
    ("reads (scan + decode + notifications)", _STORE, "RecorderProjections", "read_batch"),
    ("counts read ahead", _VIEW, "ContextView", "ahead"),
    (SPLIT, _VIEW, "ContextView", "_split"),
    (COUNTED, _VIEW, "ContextView", "_counted"),
    ("the policy's fold", "contextledger.projections.fold", "Projector", "fold"),
    ("each session's catch-up and row", "contextledger.application.render.renderer", "Renderer", "fold_row"),
    ("render digests", _VIEW, "ContextView", "_digest"),
    ("release at head", _VIEW, "ContextView", "_release_at_head"),
    ("a batch's fold, in all", _VIEW, "ContextView", "fold"),
    ("comparison", "contextledger.application.rebuild.rebuild", "", "compare_versions"),
)  # fmt: skip
"""The parts ``--parts`` times: (name, module, class or "" for a module function, function). The fold runs
inside each session's catch-up, and the counts, rows, digests and release inside a batch's fold: the table
shows each part with what it holds, and what the batch's fold leaves to its loop."""


def _parts() -> list[tuple[str, Any, str]]:
    """Each ``PARTS`` entry as (name, the class or module holding the function, the function's name)."""
    import importlib  # noqa: PLC0415

    found = []
    for name, module_name, owner_name, function_name in PARTS:
        module = importlib.import_module(module_name)
        found.append((name, getattr(module, owner_name) if owner_name else module, function_name))
    return found


def probe(out: Path, parts: bool = False) -> None:
    """Run the CLI (``sys.argv`` after ``--``) with the probes; write what they saw to ``out`` at exit."""
    import atexit  # noqa: PLC0415 - the child's own imports: the probes wrap the installed package
    import threading  # noqa: PLC0415
    from collections.abc import Callable  # noqa: PLC0415

    from contextledger.adapters import tokenizers  # noqa: PLC0415
    from contextledger.application.kernel import aside  # noqa: PLC0415
    from contextledger.application.views import view_runner  # noqa: PLC0415

    seen = dict.fromkeys(("tokenizer_cpu", "tokenizer_wall", "aside_cpu", "aside_wall"), 0.0)
    lock = threading.Lock()

    def timed(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def wrap(function: Callable[..., Any]) -> Callable[..., Any]:
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                cpu, wall = time.thread_time(), time.perf_counter()
                try:
                    return function(*args, **kwargs)
                finally:
                    with lock:
                        seen[f"{name}_cpu"] += time.thread_time() - cpu
                        seen[f"{name}_wall"] += time.perf_counter() - wall

            return wrapper

        return wrap

    def marked(function: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(runner: Any) -> Any:
            seen.setdefault("catch_up_start_ns", time.time_ns())
            try:
                return function(runner)
            finally:
                seen["catch_up_end_ns"] = time.time_ns()

        return wrapper

    # by name: the probes wrap private methods of the installed package (a bench, not an API)
    wraps = [
        (view_runner.ViewRunner, "_catch_up", marked),
        (tokenizers.TiktokenCounter, "_count_joined", timed("tokenizer")),
        (
            aside.Aside,
            "__init__",
            lambda init: lambda self, work, **kw: init(self, timed("aside")(work), **kw),
        ),
    ]
    for name, owner, function_name in _parts() if parts else []:
        seen[f"{name}_cpu"] = seen[f"{name}_wall"] = 0.0
        wraps.append((owner, function_name, timed(name)))
    for owner, name, wrap in wraps:
        setattr(owner, name, wrap(getattr(owner, name)))

    def at_exit() -> None:
        seen["exit_ns"] = time.time_ns()
        seen["main_cpu"] = time.thread_time()
        seen["process_cpu"] = time.process_time()
        out.write_text(json.dumps(seen))

    atexit.register(at_exit)  # registered before main's own (gc.freeze): it runs after them
    from contextledger.cli import main  # noqa: PLC0415

    main()


def _run(db: Path, out: Path, args: tuple[str, ...], *, parts: bool = False) -> dict[str, float]:
    """One CLI run under the probes: its phases in seconds, its CPU times, with ``parts`` its parts."""
    from harness import child_env  # noqa: PLC0415 - the probed child imports nothing of bench/

    probes = ["--probe", str(out), *(["--parts"] if parts else [])]
    command = [sys.executable, __file__, *probes, "--", "rebuild", *args]
    command += ["--workers", "1", "--db", f"sqlite:///{db}", "--json"]
    spawned = time.time_ns()
    done = subprocess.run(command, capture_output=True, text=True, env=child_env(None), check=False)
    gone = time.time_ns()
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    seen = json.loads(out.read_text())
    folded = json.loads(done.stdout)["folded"]["events"]
    start, end, exiting = seen["catch_up_start_ns"], seen["catch_up_end_ns"], seen["exit_ns"]
    return {
        "events": folded,
        "start-up": (start - spawned) / 1e9,
        "catch-up": (end - start) / 1e9,
        "after the catch-up": (exiting - end) / 1e9,
        "exit": (gone - exiting) / 1e9,
        "whole": (gone - spawned) / 1e9,
        "main thread CPU": seen["main_cpu"],
        "tokenizer thread CPU": seen["tokenizer_cpu"],
        "tokenizer thread wall in its calls": seen["tokenizer_wall"],
        "writes set aside CPU": seen["aside_cpu"],
        "writes set aside wall": seen["aside_wall"],
        "process CPU": seen["process_cpu"],
        **{name: seen[f"{name}_wall"] for name, *_ in PARTS if f"{name}_wall" in seen},
    }


def _parts_table(runs: list[dict[str, float]], raw_rate: float) -> list[str]:
    """The Markdown rows of the parts: each one's median seconds, share of the whole, and the 25 % budget."""
    events = runs[0]["events"]
    whole = statistics.median(r["whole"] for r in runs)
    budget = events / (0.25 * raw_rate)

    def median(key: str) -> float:
        return statistics.median(r[key] for r in runs)

    fold, row, batch = (
        median("the policy's fold"),
        median("each session's catch-up and row"),
        median("a batch's fold, in all"),
    )
    held = sum(
        median(name)
        for name in (
            SPLIT,
            COUNTED,
            "each session's catch-up and row",
            "render digests",
            "release at head",
        )
    )
    reads, ahead = median("reads (scan + decode + notifications)"), median("counts read ahead")
    catch_up = median("catch-up")
    rows = [
        ("start-up (spawn to catch-up)", median("start-up")),
        ("reads (scan + decode + notifications)", reads),
        ("  of which the raw floor's own work", events / raw_rate),
        ("counts read ahead", ahead),
        (SPLIT, median(SPLIT)),
        (COUNTED, median(COUNTED)),
        ("the policy's fold", fold),
        ("each session's row (its catch-up less the fold)", row - fold),
        ("render digests", median("render digests")),
        ("release at head", median("release at head")),
        ("the rest of each batch's fold (its loop)", batch - held),
        ("the rest of the catch-up (commits handed aside, batches freed)", catch_up - reads - ahead - batch),
        ("after the catch-up (comparison included)", median("after the catch-up")),
        ("  of which the comparison", median("comparison")),
        ("exit", median("exit")),
    ]
    lines = [
        "| part of the rebuild after a config change | median s | share of the whole |",
        "|---|---:|---:|",
    ]
    lines += [f"| {name} | {seconds:.3f} | {seconds / whole:.1%} |" for name, seconds in rows]
    lines.append(f"| whole | {whole:.3f} | 100.0% |")
    lines.append(
        f"| budget at 25 % of raw (events / (0.25 x raw rate)) | {budget:.3f} | {budget / whole:.1%} |"
    )
    return [*lines, ""]


def _table(kind: str, runs: list[dict[str, float]], raw_rate: float, tiktoken_s: float) -> list[str]:
    """The Markdown rows of one kind: each figure's median (min-max), then what it weighs."""
    lines = [f"| {kind} | median s (min-max) |", "|---|---|"]
    for key in runs[0]:
        if key == "events":
            continue
        values = sorted(r[key] for r in runs)
        lines.append(f"| {key} | {statistics.median(values):.3f} ({values[0]:.3f}-{values[-1]:.3f}) |")
    events = runs[0]["events"]
    catch_up = statistics.median(r["catch-up"] for r in runs)
    whole = statistics.median(r["whole"] for r in runs)
    fixed = whole - catch_up
    lines.append(f"| fixed costs (whole - catch-up) | {fixed:.3f} ({fixed / whole:.0%} of the whole) |")
    if kind == "first rebuild":
        tokenizer = statistics.median(r["tokenizer thread wall in its calls"] for r in runs)
        lines.append(f"| whole / tiktoken alone | {whole / tiktoken_s:.2f}x |")
        lines.append(f"| tokenizer thread's calls / tiktoken alone | {tokenizer / tiktoken_s:.2f}x |")
    else:
        lines.append(f"| whole, events/s / raw | {events / whole / raw_rate:.1%} |")
        lines.append(f"| catch-up alone, events/s / raw | {events / catch_up / raw_rate:.1%} |")
    return [*lines, ""]


def main() -> None:
    """Build the ledger, run the probed CLI ``--runs`` times per kind, print and save the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--parts", action="store_true", help="also time the parts of the rebuild (PARTS)")
    parser.add_argument("--probe", type=Path, help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args()
    if args.probe is not None:
        sys.argv = [sys.argv[0], *rest[rest.index("--") + 1 :]]
        probe(args.probe, args.parts)
        return
    from bench_rebuild import build  # noqa: PLC0415 - not in the probed child: its start-up is timed
    from bench_rebuild_cli import _phase  # noqa: PLC0415
    from harness import copy_ledger, save  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        base, cold, warm, out = (work / name for name in ("base.db", "cold.db", "warm.db", "probe.json"))
        events = build(base, args.copies)
        raw = [_phase("raw", base)["events_per_s"]]
        tiktoken_runs = [_phase("tiktoken", base)["seconds"]]
        runs: dict[str, list[dict[str, float]]] = {kind: [] for kind in KINDS}
        if args.parts:
            runs["parts"] = []
        for index in range(args.runs):
            copy_ledger(base, cold)
            runs["first rebuild"].append(_run(cold, out, KINDS["first rebuild"]))
            copy_ledger(cold, warm)
            runs["rebuild after a config change"].append(
                _run(warm, out, KINDS["rebuild after a config change"])
            )
            if args.parts:  # a run of its own: its probes cost a few microseconds a session
                copy_ledger(cold, warm)
                runs["parts"].append(_run(warm, out, KINDS["rebuild after a config change"], parts=True))
            raw.append(_phase("raw", base)["events_per_s"])
            tiktoken_runs.append(_phase("tiktoken", base)["seconds"])
            print(f"# run {index + 1} done", file=sys.stderr, flush=True)
    raw_rate, tiktoken_s = statistics.median(raw), statistics.median(tiktoken_runs)
    lines = [
        f"{events:,} events; raw scan + decode {raw_rate:,.0f} events/s; tiktoken alone {tiktoken_s:.2f} s",
        "",
    ]
    for kind, kind_runs in runs.items():
        lines += (
            _parts_table(kind_runs, raw_rate)
            if kind == "parts"
            else _table(kind, kind_runs, raw_rate, tiktoken_s)
        )
    text = "\n".join(lines)
    corpus = os.environ.get("CONTEXTLEDGER_BENCH_TRANSCRIPTS", "fixtures")
    path = save(
        "rebuild_phases",
        {"events": events, "corpus": corpus, "raw": raw, "tiktoken": tiktoken_runs, **runs, "markdown": text},
    )
    print(text)
    print(f"saved {path}")


if __name__ == "__main__":
    main()
