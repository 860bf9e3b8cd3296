"""Full rebuild of every view vs the raw SQLite scan + msgspec decode rate, in one run.

Usage::

    .venv/bin/python bench/bench_rebuild.py [--copies 20] [--runs 3] [--workers 2] [--db /tmp/rebuild.db]

The ledger holds every real transcript (tests/fixtures/transcripts, or the folder
``CONTEXTLEDGER_BENCH_TRANSCRIPTS`` names: ``harness.TRANSCRIPTS``) ``--copies`` times, each copy
under renamed streams with its inline texts and call ids made distinct (so no in-process cache
sees a copy's text twice). Each figure runs in a fresh process, which also reports its peak memory
(its own ``VmHWM``, workers' ``ru_maxrss``): ``raw`` scans the events table in notification order with
sqlite3 and decodes every row with the store's msgspec mapper; ``rebuild_cold_context_only`` is
the first rebuild of the ledger (the default context projection, every text tokenized, per-event
token rows written); ``rebuild_all_views_*`` rebuild, under fresh names, the context projection
plus the summaries, model_calls and search views after a config change (token counts from the
token rows), in one process and in ``--workers`` processes (batches of ``BATCH_SIZE``, rows and
checkpoints per transaction). Raw and rebuild runs are interleaved so machine load hits them
alike. The goal is a full rebuild at >= 25% of the raw rate. Results land in
``bench/results/rebuild.json``.
"""

from __future__ import annotations

import argparse
import json
import os
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
from contextledger.adapters.parallel_rebuild import rebuild_in_shards
from contextledger.adapters.store.mapper import MsgspecMapper
from contextledger.application.rebuild.audit_views import AUDIT_VIEWS
from contextledger.application.rebuild.blue_green import RebuildSpec
from contextledger.application.rebuild.rebuild import store_views
from contextledger.application.views.view_runner import BATCH_SIZE
from contextledger.domain.content import InlineText
from contextledger.domain.events import AssistantMessageAdded, SessionStarted, ToolResultRecorded
from contextledger.projections.presets import get_preset
from eventsourcing.persistence import StoredEvent
from harness import peak_mib, save, transcripts


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
        for path in transcripts():
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
    return {"events": count, "seconds": elapsed, "events_per_s": count / elapsed, "peak_mib": peak_mib()}


def phase_rebuild(db: Path, projection: str, workers: int, views: tuple[str, ...]) -> dict[str, float]:
    """Rebuild the default context projection (and ``views``) from scratch under fresh names."""
    url = f"sqlite:///{db}"
    spec = RebuildSpec(
        policy=get_preset("default").model_dump_json(),
        projection=projection,
        audit_views=views,
        batch_size=int(os.environ.get("BENCH_BATCH", str(BATCH_SIZE))),
        views_suffix=f"/{projection}",  # fresh names: every view rebuilds from scratch
    )
    started = time.perf_counter()
    if workers == 1:
        with contextledger.open_ledger(url) as ledger:
            store = store_views(ledger)[0]
            stats = spec.runner(ledger, store, store).run()
    else:
        stats = rebuild_in_shards(contextledger.open_ledger, url, spec, workers)
    elapsed = time.perf_counter() - started
    with contextledger.open_ledger(url) as ledger:
        sessions = len(store_views(ledger)[0].row_keys(projection))
    return {
        "events": stats.events,
        "workers": workers,
        "views": len(views) + 1,
        "batches": stats.batches,
        "sessions": sessions,
        "failed_sessions": len(stats.failed),
        "seconds": elapsed,
        "events_per_s": stats.events / elapsed,
        "peak_mib": peak_mib(),
        "peak_mib_workers": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
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


def _series(runs: list[dict[str, float]]) -> dict[str, Any]:
    return {
        "events_per_s": statistics.median(r["events_per_s"] for r in runs),
        "peak_mib": max(max(r["peak_mib"], r.get("peak_mib_workers", 0.0)) for r in runs),
        "runs": runs,
    }


def main() -> None:
    """Build the ledger, measure raw, cold and warm rebuilds in fresh processes, save and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--db", type=Path)
    parser.add_argument("--phase", choices=["raw", "rebuild"])
    parser.add_argument("--projection", default="bench/rebuild")
    parser.add_argument("--views", default="", help="audit views to rebuild too, comma separated")
    args = parser.parse_args()
    views = tuple(v for v in args.views.split(",") if v)
    if args.phase == "raw":
        print(json.dumps(phase_raw(args.db)))
        return
    if args.phase == "rebuild":
        print(json.dumps(phase_rebuild(args.db, args.projection, args.workers, views)))
        return
    every = ",".join(AUDIT_VIEWS)
    with tempfile.TemporaryDirectory() as folder:
        db = args.db or Path(folder) / "rebuild.db"
        started = time.perf_counter()
        events = build(db, args.copies)
        print(f"built {events:,} events in {time.perf_counter() - started:.1f}s", file=sys.stderr)
        raw, single, parallel = [], [], []
        cold = _spawn("rebuild", db, "--projection", "bench/cold", "--workers", "1")
        for i in range(args.runs):  # interleaved, so that machine load hits every series alike
            raw.append(_spawn("raw", db))
            single.append(
                _spawn("rebuild", db, "--projection", f"bench/w1-{i}", "--workers", "1", "--views", every)
            )
            parallel.append(
                _spawn(
                    "rebuild",
                    db,
                    "--projection",
                    f"bench/wn-{i}",
                    "--workers",
                    str(args.workers),
                    "--views",
                    every,
                )
            )
    raw_rate = statistics.median(r["events_per_s"] for r in raw)
    payload: dict[str, Any] = {
        "events": events,
        "copies": args.copies,
        "raw_scan_decode": _series(raw),
        "rebuild_cold_context_only": cold,
        "rebuild_all_views_1_worker": _series(single),
        f"rebuild_all_views_{args.workers}_workers": _series(parallel),
        "cold_vs_raw": cold["events_per_s"] / raw_rate,
        "all_views_1_worker_vs_raw": _series(single)["events_per_s"] / raw_rate,
        f"all_views_{args.workers}_workers_vs_raw": _series(parallel)["events_per_s"] / raw_rate,
        "goal_vs_raw": 0.25,
    }
    path = save("rebuild", payload)
    print(json.dumps({k: v for k, v in payload.items() if not isinstance(v, dict)}, indent=2))
    one, many = _series(single)["events_per_s"], _series(parallel)["events_per_s"]
    print(
        f"raw {raw_rate:,.0f} ev/s; full rebuild (context + {every}) {one:,.0f} ev/s with 1 worker "
        f"({one / raw_rate:.1%}), {many:,.0f} ev/s with {args.workers} ({many / raw_rate:.1%}); {path}"
    )


if __name__ == "__main__":
    main()
