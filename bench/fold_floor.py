"""A rebuild's fold against leaner folds of the same inputs: what folding fewer Python objects could save.

Usage::

    .venv/bin/python bench/fold_floor.py [--copies 20] [--runs 7]

The ledger is bench_rebuild's (every fixture transcript ``--copies`` times). A first rebuild under the
default policy, then a rebuild after a config change under ``threshold`` run in process with
``Projector.fold`` wrapped (``bench_fold.py --phase capture``), keep each fold call's counted events and
starting state. A fresh process then folds the same calls ``--runs`` times each way, the collector paused,
as a rebuild's catch-up does:

- ``policy``: the rebuild's own fold (``Projector.fold`` under ``threshold``);
- ``card off``: the same policy with the session-state card disabled;
- ``card and short forms off``: the same again with the truncation short forms disabled;
- ``columns``: a floor for the fold's per-message work in Python (``columns``): one pass, each message
  a row of integer columns (position, role, tokens, group), each step's group by its start, each call
  paired with its result, the running sum checked against a mark. No ``Entry`` or ``Group`` objects,
  no card, no short forms, no compaction: a floor, not a fold the product could ship;
- ``touch``: one pass reading each counted event's position, event, counts and type.

``columns`` is checked against the real fold: for every session the card-and-short-forms-off fold
folds from its start in one call and leaves uncompacted with every message whole, its window's tokens and
groups equal the columns' sum and count (the same token accounting, ``check``). Anything else the fold does
(head, turns, compaction points, the card) the floor leaves out: what a fold over columns saves is at most
the difference. Results land in ``bench/results/fold_floor.json``.
"""

from __future__ import annotations

import argparse
import json
import pickle
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench_rebuild import build
from harness import child_json, save
from rebuild_ceiling import POLICY

CAPTURE = str(Path(__file__).with_name("bench_fold.py"))
"""The script whose ``--phase capture`` keeps a rebuild's fold calls (``bench_fold.capture``)."""

WAYS = ("policy", "card off", "card and short forms off", "columns", "touch")


def columns(events: Sequence[Any], pending: int) -> tuple[int, int, int]:  # noqa: PLR0915 - one loop, on purpose
    """Fold counted events into integer columns; return (messages, groups, window tokens).

    ``pending``: the tokens of a result placeholder (``Projector.start().pending_tokens``). Sizes follow
    ``EntryBuilder``'s accounting for messages that enter whole: each message its counts plus
    ``MESSAGE_OVERHEAD``, each call ``TOOL_CALL_OVERHEAD`` and its two wire texts, each call still
    waiting a placeholder, each media part of a user message its estimate (``media_tokens``). Events of
    other types (a session's start, pins, summaries) are skipped. It does less than the fold by design: no
    head, turn or step bookkeeping, no system or tools tokens, a mark that never triggers, no reducers.
    """
    from contextledger.domain.events import (  # noqa: PLC0415 - imported where timed code runs
        AssistantMessageAdded,
        ToolResultRecorded,
        UserMessageAdded,
    )
    from contextledger.projections.context import MESSAGE_OVERHEAD, TOOL_CALL_OVERHEAD  # noqa: PLC0415
    from contextledger.projections.media import media_tokens  # noqa: PLC0415

    position: list[int] = []
    role: list[int] = []
    tokens: list[int] = []
    group_of: list[int] = []
    starts: list[int] = []
    group_tokens: list[int] = []
    owners: dict[str, int] = {}
    total = 0
    mark = sys.maxsize  # checked after every event, as the fold checks its high mark
    compactions = 0
    for counted in events:
        event = counted.event
        kind = type(event)
        if kind is AssistantMessageAdded:
            counts = counted.tokens
            size = counts[0] + MESSAGE_OVERHEAD
            calls = event.tool_calls
            group = len(starts)
            if calls:
                size += TOOL_CALL_OVERHEAD * len(calls) + sum(counts[1 : 1 + 2 * len(calls)])
                for call in calls:
                    owners[call.id] = group
            added = size + len(calls) * pending
            starts.append(counted.position)
            group_tokens.append(added)
            role.append(1)
        elif kind is ToolResultRecorded:
            found = owners.pop(event.call_id, None)
            if found is None:
                continue
            group = found
            size = counted.tokens[0] + MESSAGE_OVERHEAD
            added = size - pending
            group_tokens[group] += added
            role.append(2)
        elif kind is UserMessageAdded:
            size = counted.tokens[0] + MESSAGE_OVERHEAD
            if event.media:
                size += sum(media_tokens(part) for part in event.media)
            added = size
            group = len(starts)
            starts.append(counted.position)
            group_tokens.append(added)
            role.append(0)
        else:
            continue
        position.append(counted.position)
        tokens.append(size)
        group_of.append(group)
        total += added
        if total > mark:
            compactions += 1
    return len(position), len(starts), total


def touch(events: Sequence[Any]) -> int:
    """Read each counted event's position, event, counts and type once; return the positions' sum."""
    seen = 0
    for counted in events:
        _ = (counted.event, counted.tokens, type(counted.event))
        seen += counted.position
    return seen


def _variants(policy: Any) -> dict[str, Any]:
    """The policy, without its card, and without its card and its short forms."""
    no_card = policy.model_copy(update={"card": policy.card.model_copy(update={"enabled": False})})
    plain = no_card.model_copy(update={"truncation": policy.truncation.model_copy(update={"enabled": False})})
    return {"policy": policy, "card off": no_card, "card and short forms off": plain}


def check(calls: Sequence[tuple[list[Any], Any]], projector: Any) -> int:
    """Compare ``columns`` with ``projector``'s fold (no card, no short forms); return the sessions compared.

    Only sessions folded from their start in one call that the fold left uncompacted, each message whole and
    no summary shown, are compared: there the window's tokens are the sum of every message, which ``columns``
    computes. Raises ``RuntimeError`` on the first that differs, or when no session qualifies.
    """
    pending = projector.start().pending_tokens
    compared = 0
    for events, state in calls:
        if state is not None and state.position:
            continue  # a session folded on from an earlier batch: its window holds more than these events
        folded = projector.fold(events, state)
        window = folded.window
        whole = all(entry.kind == "message" for group in window.groups for entry in group.entries)
        if folded.compactions or window.removed or window.summaries or not whole:
            continue
        _, groups, total = columns(events, pending)
        if (groups, total) != (len(window.groups), window.tokens):
            msg = (
                f"{folded.session_id}: columns give {groups} groups, {total} tokens; "
                f"the fold {len(window.groups)}, {window.tokens}"
            )
            raise RuntimeError(msg)
        compared += 1
    if not compared:
        raise RuntimeError("no session folded without compaction: nothing to compare")
    return compared


def phase_time(db: Path, calls_file: Path, runs: int) -> dict[str, Any]:
    """Time every way over the captured calls ``runs`` times, the collector paused; check ``columns``."""
    import contextledger  # noqa: PLC0415
    from contextledger.application.kernel.collector import collector_paused  # noqa: PLC0415
    from contextledger.application.render.renderer import Renderer  # noqa: PLC0415

    calls: list[tuple[list[Any], Any]] = pickle.loads(calls_file.read_bytes())  # noqa: S301 - our own file
    times: dict[str, list[float]] = {way: [] for way in WAYS}
    with contextledger.open_ledger(f"sqlite:///{db}") as ledger:
        renderer = Renderer(ledger)
        projectors = {
            way: renderer.projector(p) for way, p in _variants(renderer.projector(POLICY).policy).items()
        }
        plain = projectors["card and short forms off"]
        compared = check(calls, plain)
        pending = plain.start().pending_tokens
        ways: dict[str, Callable[[list[Any], Any], object]] = {
            way: (lambda events, state, p=p: p.fold(events, state))  # fold copies the state it is given
            for way, p in projectors.items()
        }
        ways["columns"] = lambda events, _state: columns(events, pending)
        ways["touch"] = lambda events, _state: touch(events)
        for way in projectors:  # the first fold counts the derived texts into the cache: not timed
            for events, state in calls:
                ways[way](events, state)
        for _ in range(runs):
            for way in WAYS:  # interleaved: the machine's pace moves all of them alike
                fold = ways[way]
                with collector_paused():
                    started = time.perf_counter()
                    for events, state in calls:
                        fold(events, state)
                    times[way].append(time.perf_counter() - started)
    events = sum(len(events) for events, _ in calls)
    return {"events": events, "calls": len(calls), "compared": compared, "times": times}


def table(result: dict[str, Any]) -> list[str]:
    """The markdown table of one run: each way's fastest and median, and its share of the policy's fold."""
    times = result["times"]
    base = statistics.median(times["policy"])
    head = f"{result['events']:,} events in {result['calls']:,} fold calls"
    lines = [
        f"{head}; `columns` checked against the fold on {result['compared']:,} sessions",
        "",
        "| fold | s, fastest | median (min-max) | median / the policy's fold |",
        "|---|---:|---:|---:|",
    ]
    for way in WAYS:
        runs = times[way]
        median = statistics.median(runs)
        spread = f"{min(runs):.3f}-{max(runs):.3f}"
        lines.append(f"| {way} | {min(runs):.3f} | {median:.3f} ({spread}) | {median / base:.2f} |")
    return lines


def main() -> None:
    """Build the ledger, capture the rebuild's fold calls, time each way in a fresh process, print a table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=20)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--phase", choices=["time"])
    parser.add_argument("--db", type=Path)
    parser.add_argument("--calls", type=Path)
    args = parser.parse_args()
    if args.phase == "time":
        print(json.dumps(phase_time(args.db, args.calls, args.runs)))
        return
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        db = work / "ledger.db"
        build(db, args.copies)
        calls = work / "calls.pkl"
        for policy in ("default", POLICY):  # the first rebuild counts every text; the second is timed
            child_json(
                [CAPTURE, "--phase", "capture", "--db", str(db), "--policy", policy, "--calls", str(calls)]
            )
        result = child_json(
            [__file__, "--phase", "time", "--db", str(db), "--calls", str(calls), "--runs", str(args.runs)]
        )
    markdown = "\n".join(table(result))
    print(markdown)
    save("fold_floor", {**result, "markdown": markdown})


if __name__ == "__main__":
    main()
