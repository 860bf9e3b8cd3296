"""Full rebuild of the context projection vs the raw SQLite scan + msgspec decode rate, in one run.

Usage::

    .venv/bin/python bench/bench_rebuild.py [--copies 20] [--runs 3] [--db /tmp/rebuild.db]

The ledger holds every real transcript (tests/fixtures/transcripts) ``--copies`` times (copies are the
same rows under renamed streams). Each figure runs in a fresh process, which also reports its peak
memory (``ru_maxrss``): ``raw`` scans the events table in notification order with sqlite3 and decodes
every row with the store's msgspec mapper; ``rebuild_cold`` rebuilds the default context projection
(batches of 1,000, rows + tracking per transaction) counting tokens for the first time;
``rebuild_warm`` rebuilds a second version (a config change) with the token counts cached. The goal
is a warm rebuild at >= 25% of the raw rate. Results land in ``bench/results/rebuild.json``.
"""

from __future__ import annotations

import argparse
import json
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import contextledger
import msgspec
from contextledger.adapters.importers.service import import_file
from contextledger.adapters.store.mapper import MsgspecMapper
from contextledger.adapters.store.projections import RecorderProjections
from contextledger.application.projection_runner import ProjectionRunner
from contextledger.domain.content import InlineText
from contextledger.domain.events import AssistantMessageAdded, SessionStarted, ToolResultRecorded
from eventsourcing.persistence import StoredEvent
from harness import save

TRANSCRIPTS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "transcripts"


def _distinct(event: Any, copy: int) -> Any:
    """The event of copy ``copy``: its inline texts and call ids made unique to the copy.

    Copies must not share texts: a rebuild counts each distinct text once per process, so identical
    copies would measure a cache, not a rebuild of that many distinct sessions.
    """
    mark = f" [copy {copy}]"
    changes: dict[str, Any] = {}
    content = getattr(event, "content", None)
    if isinstance(content, InlineText):
        changes["content"] = InlineText(content.text + mark)
    if isinstance(event, SessionStarted):
        changes["system_prompt"] = event.system_prompt + mark
    if isinstance(event, AssistantMessageAdded) and event.tool_calls:
        changes["tool_calls"] = tuple(
            msgspec.structs.replace(c, id=f"{c.id}-{copy}", arguments=c.arguments) for c in event.tool_calls
        )
    if isinstance(event, ToolResultRecorded):
        changes["call_id"] = f"{event.call_id}-{copy}"
    return msgspec.structs.replace(event, **changes) if changes else event


def build(db: Path, copies: int) -> int:
    """Import every transcript, then add ``copies - 1`` copies of its rows under renamed streams.

    Every inline text and call id of a copy is made distinct (blob texts are shared, as their
    addresses are).
    """
    with contextledger.open_ledger(f"sqlite:///{db}") as ledger:
        for path in sorted(TRANSCRIPTS.iterdir()):
            if path.suffix != ".md" or "history" in path.name:
                assert import_file(ledger, path).ok, path
    mapper = MsgspecMapper()
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT originator_id, originator_version, topic, state FROM ledger_events ORDER BY rowid"
        ).fetchall()
        for copy in range(1, copies):
            copied = []
            for stream, version, topic, state in rows:
                session, sep, kind = stream.partition("::")
                event = _distinct(mapper.decode(stream, version, topic, state), copy)
                stored = mapper.to_stored(f"{session}#{copy}{sep}{kind}", version, event)
                copied.append((stored.originator_id, version, stored.topic, stored.state))
            conn.executemany(
                "INSERT INTO ledger_events (originator_id, originator_version, topic, state) "
                "VALUES (?, ?, ?, ?)",
                copied,
            )
        return int(conn.execute("SELECT count(*) FROM ledger_events").fetchone()[0])


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def phase_raw(db: Path) -> dict[str, float]:
    """Scan every event in notification order and decode it (the floor a rebuild is compared with)."""
    mapper = MsgspecMapper()
    started = time.perf_counter()
    count = 0
    with sqlite3.connect(db) as conn:
        cursor = conn.execute(
            "SELECT originator_id, originator_version, topic, state FROM ledger_events ORDER BY rowid"
        )
        while rows := cursor.fetchmany(1_000):
            for row in rows:
                mapper.to_recorded(StoredEvent(row[0], row[1], row[2], row[3]))
            count += len(rows)
    elapsed = time.perf_counter() - started
    return {"events": count, "seconds": elapsed, "events_per_s": count / elapsed, "peak_mib": _peak_mib()}


def phase_rebuild(db: Path, projection: str) -> dict[str, float]:
    """Rebuild the default context projection from scratch under the name ``projection``."""
    with contextledger.open_ledger(f"sqlite:///{db}") as ledger:
        views = RecorderProjections(ledger.ports.log)  # type: ignore[arg-type]
        runner = ProjectionRunner(ledger, views, views, projection=projection)
        started = time.perf_counter()
        stats = runner.run()
        elapsed = time.perf_counter() - started
        sessions = len(views.row_keys(projection))
    return {
        "events": stats.events,
        "batches": stats.batches,
        "sessions": sessions,
        "failed_sessions": len(stats.failed),
        "seconds": elapsed,
        "events_per_s": stats.events / elapsed,
        "peak_mib": _peak_mib(),
    }


def _spawn(phase: str, db: Path, *extra: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, "--phase", phase, "--db", str(db), *extra],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    """Build the ledger, measure raw, cold and warm rebuilds in fresh processes, save and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--db", type=Path)
    parser.add_argument("--phase", choices=["raw", "rebuild"])
    parser.add_argument("--projection", default="bench/rebuild")
    args = parser.parse_args()
    if args.phase == "raw":
        print(json.dumps(phase_raw(args.db)))
        return
    if args.phase == "rebuild":
        print(json.dumps(phase_rebuild(args.db, args.projection)))
        return
    with tempfile.TemporaryDirectory() as folder:
        db = args.db or Path(folder) / "rebuild.db"
        started = time.perf_counter()
        events = build(db, args.copies)
        print(f"built {events:,} events in {time.perf_counter() - started:.1f}s", file=sys.stderr)
        raw = [_spawn("raw", db) for _ in range(args.runs)]
        cold = _spawn("rebuild", db, "--projection", "bench/cold")
        warm = [_spawn("rebuild", db, "--projection", f"bench/warm{i}") for i in range(args.runs)]
    raw_rate = statistics.median(r["events_per_s"] for r in raw)
    warm_rate = statistics.median(r["events_per_s"] for r in warm)
    payload: dict[str, Any] = {
        "events": events,
        "copies": args.copies,
        "raw_scan_decode": {
            "events_per_s": raw_rate,
            "peak_mib": max(r["peak_mib"] for r in raw),
            "runs": raw,
        },
        "rebuild_cold": cold,
        "rebuild_warm": {
            "events_per_s": warm_rate,
            "peak_mib": max(r["peak_mib"] for r in warm),
            "runs": warm,
        },
        "warm_vs_raw": warm_rate / raw_rate,
        "cold_vs_raw": cold["events_per_s"] / raw_rate,
        "goal_warm_vs_raw": 0.25,
    }
    path = save("rebuild", payload)
    print(
        json.dumps(
            {k: v for k, v in payload.items() if k not in {"raw_scan_decode", "rebuild_warm"}}, indent=2
        )
    )
    print(
        f"raw {raw_rate:,.0f} ev/s, warm rebuild {warm_rate:,.0f} ev/s ({warm_rate / raw_rate:.1%}), {path}"
    )


if __name__ == "__main__":
    main()
