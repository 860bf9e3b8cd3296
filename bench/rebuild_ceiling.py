"""How fast a rebuild after a config change could be with none of its plumbing: the same rows, against raw.

Usage::

    .venv/bin/python bench/rebuild_ceiling.py [--copies 20] [--runs 5]

Issue 22 asks a rebuild after a config change for >= 25 % of the raw scan + decode. Much of a rebuild's time
is neither that floor nor the policy's fold: notifications built, token rows and card facts read per batch,
fork positions, the renderer's cache, a commit per batch, the states released at their heads. This bench
asks how far taking ALL of that away could go. The **ceiling** (``phase_ceiling``, in a process of its own,
timed after its imports and the tokenizer's load) does only what every rebuild must:

- the floor's scan of every stored event and its msgspec decode;
- each session event given its stored token counts (``CountedReader.with_counts``, which also resolves the
  blob texts the policy cuts);
- each message given its stored card facts (``CardFacts``);
- the policy's fold of each session from its first event to its last (``Projector.fold``);
- each session's row encoded (``encode_row``);
- the rows written, in one commit (under a scratch name, dropped after).

It holds every session in memory at once: it is a bound, not a design. It is checked: the sessions it folds
must be those of the version the CLI rebuild wrote, and every row must equal that rebuild's, byte for byte,
else the phase fails (a ledger with summary artifacts or forks, which it does not fold, fails so).

Each round runs, each in a fresh process: raw (``bench_rebuild_cli``'s phase); the CLI rebuild after a config
change (``rebuild --policy threshold --workers 1 --json --no-compare`` on a copy of what a first rebuild
left); the ceiling on that copy; the same CLI rebuild with its comparison, on a fresh copy; and the same CLI
on an empty ledger (``fixed costs``: interpreter, imports, typer, the config recorded, leases, exit: what
every CLI rebuild pays whatever its size). The table gives medians (min-max) of the seconds and of each
figure's share of the raw run of its round (raw's seconds over its own); the **ceiling + fixed costs**: what a
CLI rebuild would read with every part of its plumbing gone; and the same plus the comparison's cost (the CLI
with it less without, per round): what a rebuild with its comparison would read.
Results land in ``bench/results/rebuild_ceiling.json``.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import contextledger
from bench_rebuild import build
from bench_rebuild_cli import _cli as cli_run
from bench_rebuild_cli import _phase as raw_phase
from bench_rebuild_cli import rebuild_command
from contextledger.adapters.store.mapper import MsgspecMapper
from contextledger.application.kernel.collector import collector_paused
from contextledger.application.kernel.messages import SIDE_STREAM_SEPARATOR
from contextledger.application.rebuild.context_view import ContextView
from contextledger.application.rebuild.rebuild import store_views
from contextledger.application.render.context_rows import encode_row
from contextledger.domain.content import InlineText
from contextledger.projections.counting import CountedEvent
from harness import child_env, child_json, copy_ledger, save

POLICY = "threshold"
"""The policy of the rebuild after a config change (bench_rebuild_cli's)."""

SCRATCH = "#ceiling"
"""Appended to the version's name: where the ceiling writes its rows (dropped after each run)."""


def phase_ceiling(db: Path, policy: str = POLICY) -> dict[str, Any]:
    """Fold every session of ``db`` with no plumbing, write the rows; check each against the CLI's; time it.

    ``db`` holds the rows of ``policy``'s version (a CLI rebuild wrote them) and the token counts and card
    facts of every event (a first rebuild wrote them). The collector is paused, as in a rebuild's catch-up.
    The rows are written in one commit under a scratch name (``SCRATCH``, dropped after), as a rebuild must
    write them. Raises ``RuntimeError`` when a row differs from the stored one, or when the ceiling's sessions
    are not the version's; ``KeyError`` when a session event has no stored counts.
    """
    with contextledger.open_ledger(f"sqlite:///{db}") as ledger:
        view = ContextView(ledger, store_views(ledger)[0], policy=policy)
        view.renderer.counter.count_texts([InlineText("the tokenizer loads before the clock starts")])
        stored = view.store.load_rows(view.name, view.store.row_keys(view.name))
        scratch = view.name + SCRATCH
        with collector_paused():
            started = time.perf_counter()
            encoded, events, split = _fold_all(db, view)
            written = time.perf_counter()
            rows = {key: (stored[key][0] if key in stored else 0, data) for key, data in encoded.items()}
            view.store.commit(scratch, 0, rows)
            elapsed = time.perf_counter() - started
        view.store.drop(scratch)
    missing, extra = sorted(stored.keys() - encoded.keys()), sorted(encoded.keys() - stored.keys())
    differing = [key for key, data in encoded.items() if key in stored and stored[key][1] != data]
    if missing or extra or differing or not encoded:
        msg = (
            f"{view.name}: of {len(encoded)} rows folded, {len(differing)} differ from the stored ones "
            f"(e.g. {differing[:3]}), {len(extra)} are not stored (e.g. {extra[:3]}); "
            f"{len(missing)} stored rows were not folded (e.g. {missing[:3]})"
        )
        raise RuntimeError(msg)
    split["writes"] = elapsed - (written - started)
    return {"seconds": elapsed, "sessions": len(encoded), "events_folded": events, **split}


def _fold_all(db: Path, view: ContextView) -> tuple[dict[str, bytes], int, dict[str, float]]:
    """``phase_ceiling``'s timed part: every session's row, the events folded, the seconds of each step.

    The steps are ``reads`` (scan, decode, stored counts) and ``folds`` (card facts, fold, row encoding). The
    events are freed on return: the rest of ``phase_ceiling``'s time.
    """
    projector, cards = view.projector, view.card_facts
    with_counts, decode = view.renderer.reader.with_counts, MsgspecMapper().decode
    started = time.perf_counter()
    counts = view.tokens.load(0, sys.maxsize)
    sessions: defaultdict[str, list[CountedEvent]] = defaultdict(list)
    with sqlite3.connect(db) as conn:
        cursor = conn.execute(
            "SELECT rowid, originator_id, originator_version, topic, state FROM ledger_events ORDER BY rowid"
        )
        while rows := cursor.fetchmany(1_000):
            for row_id, stream, position, topic, state in rows:
                event = decode(stream, position, topic, state)
                if SIDE_STREAM_SEPARATOR not in stream:
                    sessions[stream].append(with_counts(projector, position, event, counts[row_id]))
    read = time.perf_counter()
    facts = cards.batch(sessions) if cards is not None else None
    encoded: dict[str, bytes] = {}
    for session_id, events in sessions.items():
        if facts is not None:
            facts.attach(session_id, events)  # in place, as the rebuild's batches do
        folded = projector.fold(events)
        encoded[session_id] = encode_row(folded, set(), set())
    split = {"reads": read - started, "folds": time.perf_counter() - read}
    return encoded, sum(len(events) for events in sessions.values()), split


def _phase(name: str, db: Path) -> dict[str, Any]:
    """Run ``--phase name`` on ``db`` in a fresh process; what it printed last."""
    return child_json([__file__, "--phase", name, "--db", str(db)])


def _round(cold: Path, empty: Path, work: Path) -> dict[str, float]:
    """One round's seconds: raw, the CLI rebuild, the ceiling on its rows, the rebuild compared, an empty one.

    Raw and the CLI runs are ``bench_rebuild_cli``'s own (its raw phase; its CLI run, timed from outside).
    """
    raw = raw_phase("raw", cold)
    copy, blank = work / "warm.db", work / "blank.db"
    copy_ledger(cold, copy)
    cli = cli_run(None, copy, "--policy", POLICY, "--no-compare")["seconds"]
    ceiling = _phase("ceiling", copy)
    copy_ledger(cold, copy)
    compared = cli_run(None, copy, "--policy", POLICY)["seconds"]
    copy_ledger(empty, blank)
    fixed = cli_run(None, blank, "--policy", POLICY, "--no-compare")["seconds"]
    copy.unlink()
    blank.unlink()
    return {
        "raw": raw["seconds"],
        "cli": cli,
        "ceiling": ceiling["seconds"],
        "ceiling_reads": ceiling["reads"],
        "ceiling_folds": ceiling["folds"],
        "ceiling_writes": ceiling["writes"],
        "fixed": fixed,
        "cli_compare": compared,
        "sessions": ceiling["sessions"],
    }


def table(events: int, rounds: list[dict[str, float]]) -> list[str]:
    """The markdown table of the rounds: seconds and share of each round's raw run, medians (min-max).

    Each round holds the seconds of ``raw``, ``ceiling`` (its ``ceiling_reads``, ``ceiling_folds`` and
    ``ceiling_writes``), ``fixed``, ``cli`` and ``cli_compare``, and the ``sessions`` whose rows the ceiling
    matched. A part or a difference (a row named "- ...": plumbing, the comparison's cost) is taken per round,
    then its median; it has no share of raw.
    """
    sessions = ", ".join(sorted({f"{r['sessions']:,.0f}" for r in rounds}))
    figures: list[tuple[str, Callable[[dict[str, float]], float]]] = [
        ("raw scan + decode (the floor)", lambda r: r["raw"]),
        ("ceiling: the same rows with no plumbing, after its imports", lambda r: r["ceiling"]),
        ("- of which reads: scan, decode, stored counts", lambda r: r["ceiling_reads"]),
        ("- of which folds: card facts, the policy's fold, row encoding", lambda r: r["ceiling_folds"]),
        ("- of which writes: the rows in one commit", lambda r: r["ceiling_writes"]),
        ("fixed costs: the CLI rebuild of an empty ledger", lambda r: r["fixed"]),
        ("ceiling + fixed costs: a CLI rebuild with no plumbing", lambda r: r["ceiling"] + r["fixed"]),
        ("the CLI rebuild after a config change, --no-compare", lambda r: r["cli"]),
        (
            "- its plumbing: less the ceiling and the fixed costs",
            lambda r: r["cli"] - r["ceiling"] - r["fixed"],
        ),
        ("the same CLI rebuild with its comparison", lambda r: r["cli_compare"]),
        ("- the comparison's cost: with it less without", lambda r: r["cli_compare"] - r["cli"]),
        (
            "ceiling + fixed costs + the comparison's cost",
            lambda r: r["ceiling"] + r["fixed"] + r["cli_compare"] - r["cli"],
        ),
    ]
    lines = [
        (
            f"{events:,} events, {len(rounds)} rounds; the ceiling's rows of {sessions} sessions equal to "
            "the CLI's, byte for byte"
        ),
        "",
        "| measurement | s, median (min-max) | share of raw, median (min-max) |",
        "|---|---:|---:|",
    ]
    for name, seconds_of in figures:
        seconds = [seconds_of(r) for r in rounds]
        cell = f"{statistics.median(seconds):.3f} ({min(seconds):.3f}-{max(seconds):.3f})"
        if name.startswith("- "):
            lines.append(f"| {name} | {cell} | |")
            continue
        shares = [r["raw"] / seconds_of(r) for r in rounds]
        share = f"{statistics.median(shares):.1%} ({min(shares):.1%}-{max(shares):.1%})"
        lines.append(f"| {name} | {cell} | {share} |")
    budget = statistics.median(r["raw"] / 0.25 for r in rounds)
    lines.append(f"| budget at 25 % of raw (raw's seconds / 0.25) | {budget:.3f} | 25.0% |")
    return lines


def main() -> None:
    """Build the ledger, run a first rebuild, then ``--runs`` rounds; print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=20)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--db", type=Path)
    parser.add_argument("--phase", choices=["ceiling"])
    args = parser.parse_args()
    if args.phase:
        print(json.dumps(phase_ceiling(args.db)))
        return
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        cold, empty = work / "cold.db", work / "empty.db"
        events = build(cold, args.copies)
        first = rebuild_command(cold, "--policy", "default", "--switch")  # token counts and card facts stored
        subprocess.run(first, check=True, capture_output=True, env=child_env(None))
        contextledger.open_ledger(f"sqlite:///{empty}").close()
        rounds = []
        for index in range(args.runs):
            rounds.append(_round(cold, empty, work))
            print(f"# round {index + 1} done", file=sys.stderr, flush=True)
    lines = table(events, rounds)
    path = save("rebuild_ceiling", {"events": events, "rounds": rounds, "markdown": "\n".join(lines)})
    print("\n".join(lines))
    print(f"saved {path}")


if __name__ == "__main__":
    main()
