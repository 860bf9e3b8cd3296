"""Append benchmarks: durable single appends at 100 and 10,000 events, batched vs raw SQLite.

Run: .venv/bin/python bench/bench_append.py [--quick]
     .venv/bin/python bench/bench_append.py --stages   # CPU per event of each stage of a batched append
     .venv/bin/python bench/bench_append.py --pairs 5 --before main   # bench_scale's append, interleaved
"""

from __future__ import annotations

import argparse
import gc
import itertools
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import contextledger
from contextledger.domain.content import InlineText
from contextledger.domain.events import UserMessageAdded

sys.path.insert(0, str(Path(__file__).parent))
from harness import median_of_runs, percentile, save, spawn_medians, time_each

PAYLOAD = "x" * 300  # the ~300-byte messages of research/eventsourcing.md


def fill(ledger: contextledger.Ledger, session_id: str, events: int) -> None:
    """Append ``events - 1`` user messages after the start, 1,000 per transaction."""
    remaining = events - ledger.version(session_id)
    while remaining > 0:
        batch = min(1000, remaining)
        ledger.append_many(session_id, [{"role": "user", "content": PAYLOAD}] * batch)
        remaining -= batch


def single_append_latency(size: int, samples: int, spawns: int, url: str) -> dict[str, Any]:
    """p50/p99 of one durable append (its own transaction) to a session of ``size`` events.

    Then the first append of a new process (a real subprocess per sample, rules state rebuilt from
    the persisted snapshot and the log): the operation timed inside the child, and the whole process.
    """
    with contextledger.open_ledger(url) as ledger:
        session_id = ledger.start_session(system_prompt="bench")
        fill(ledger, session_id, size)
        durations = time_each(lambda: ledger.add_user_message(session_id, PAYLOAD), samples)
    return {
        "p50_ms": statistics.median(durations) * 1000,
        "p99_ms": percentile(durations, 0.99) * 1000,
        "new_process_first_append": spawn_medians("append", [url, session_id], spawns),
    }


def batched_ledger_rate(total: int, batch: int, folder: Path) -> float:
    """Events per second appending ``total`` events ``batch`` per transaction through the ledger."""
    path = folder / f"batched-{time.perf_counter_ns()}.db"
    with contextledger.open_ledger(f"sqlite:///{path}") as ledger:
        session_id = ledger.start_session(system_prompt="bench")
        messages = [{"role": "user", "content": PAYLOAD}] * batch
        start = time.perf_counter()
        for _ in range(total // batch):
            ledger.append_many(session_id, messages)
        return total / (time.perf_counter() - start)


def stored_row_bytes() -> int:
    """Size of the stored state of one benchmark event, for the raw baseline."""
    from contextledger.adapters.store.mapper import MsgspecMapper  # noqa: PLC0415

    return len(MsgspecMapper().to_stored("s", 1, UserMessageAdded(content=InlineText(PAYLOAD))).state)


def raw_table(path: Path) -> sqlite3.Connection:
    """A plain sqlite3 database (WAL, synchronous=FULL) with an events table of the store's key."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute(
        "CREATE TABLE e (originator_id TEXT, originator_version INTEGER, topic TEXT, state BLOB, "
        "PRIMARY KEY (originator_id, originator_version))"
    )
    return conn


def raw_sqlite_rate(total: int, batch: int, folder: Path, row_bytes: int) -> float:
    """Rows per second inserting the same bytes with plain sqlite3 (WAL, synchronous=FULL)."""
    conn = raw_table(folder / f"raw-{time.perf_counter_ns()}.db")
    state = b"x" * row_bytes
    version = 0
    start = time.perf_counter()
    for _ in range(total // batch):
        rows = [("s", version + i + 1, "contextledger/UserMessageAdded/v1", state) for i in range(batch)]
        version += batch
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO e VALUES (?,?,?,?)", rows)
        conn.execute("COMMIT")
    rate = total / (time.perf_counter() - start)
    conn.close()
    return rate


def raw_sqlite_single_latency(samples: int, folder: Path, row_bytes: int) -> float:
    """Median seconds of one plain sqlite3 insert committed on its own (WAL, synchronous=FULL)."""
    conn = sqlite3.connect(folder / f"raw-single-{time.perf_counter_ns()}.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE e (id TEXT, v INTEGER, topic TEXT, state BLOB, PRIMARY KEY (id, v))")
    state = b"x" * row_bytes
    counter = iter(range(1, samples + 1))

    def insert() -> None:
        conn.execute("BEGIN")
        conn.execute("INSERT INTO e VALUES ('s', ?, 't', ?)", (next(counter), state))
        conn.execute("COMMIT")

    durations = time_each(insert, samples)
    conn.close()
    return statistics.median(durations)


_STAGES = ("parse", "draft", "check", "encode", "insert+commit", "apply", "rules snapshot")


def stage_split(rounds: int, batches: int, folder: Path, batch: int = 1000) -> dict[str, float]:
    """CPU µs per event of each stage of ``append_many`` of ``batch`` plain messages (least of ``rounds``).

    Each stage is the ledger's own call, run apart on the same batch: parse (``parse_for_append``), draft
    (``EventDrafter.events``), check (``SessionState.check``), encode (the store's ``_encode_rows``),
    insert and commit (the recorder's ``insert_rows``, the rules snapshot with it when due), apply
    (``state.apply_all``, not run when the snapshot's state is kept), the rules snapshot
    (``RulesCache.snapshot_after``). "whole append_many" is the call itself, and "of which cyclic GC" the
    collector's time inside it. The stages run with the collector off (its time is the process's, not
    the stage's that happens to trigger it).
    """
    from contextledger.application.kernel.messages import parse_for_append  # noqa: PLC0415

    best: dict[str, float] = {}
    messages = [{"role": "user", "content": PAYLOAD}] * batch
    collecting: list[float] = []

    def clock_gc(phase: str, _info: dict[str, int]) -> None:
        if phase == "start":
            collecting.append(time.process_time())
        else:
            spent["of which cyclic GC"] += time.process_time() - collecting.pop()

    for round_ in range(rounds):
        spent = dict.fromkeys(("whole append_many", "of which cyclic GC", *_STAGES), 0.0)
        with contextledger.open_ledger(f"sqlite:///{folder / f'stages-{round_}.db'}") as ledger:
            session_id = ledger.start_session(system_prompt="bench")
            store, rules, drafts = ledger.ports.log, ledger._rules, ledger._drafts  # noqa: SLF001
            gc.callbacks.append(clock_gc)
            for _ in range(batches):
                start = time.process_time()
                ledger.append_many(session_id, messages)
                spent["whole append_many"] += time.process_time() - start
            gc.callbacks.remove(clock_gc)
            gc.disable()
            for _ in range(batches):
                state = rules.get(session_id)
                clock = time.process_time()
                marks = [clock]
                parsed = parse_for_append(messages)
                marks.append(time.process_time())
                events = drafts.events(parsed, state, {}, {})
                marks.append(time.process_time())
                state.check(events)
                marks.append(time.process_time())
                stored = store._encode_rows(session_id, state.version + 1, events)  # type: ignore[attr-defined]  # noqa: SLF001
                marks.append(time.process_time())
                due = rules.snapshot_after(state, events)
                marks.append(time.process_time())
                snapshot = None if due is None else due[0]
                extras = {"snapshots": [snapshot]} if snapshot else {}
                store.recorder.insert_rows(stored, blobs={}, idempotency=[], **extras)  # type: ignore[attr-defined]
                marks.append(time.process_time())
                if due is None:
                    state.apply_all(events)
                marks.append(time.process_time())
                rules.remember(state if due is None else due[1], snapshot)
                for name, (a, b) in zip(
                    ("parse", "draft", "check", "encode", "rules snapshot", "insert+commit", "apply"),
                    itertools.pairwise(marks),
                    strict=True,
                ):
                    spent[name] += b - a
            gc.enable()
        for name, seconds in spent.items():
            best[name] = min(best.get(name, float("inf")), seconds / (batches * batch) * 1e6)
    return best


def interleaved_pairs(pairs: int, before: str) -> None:
    """``bench_scale.py --quick --only append`` on ``before`` and on this tree, in alternating children.

    ``bench_scale --before`` runs every round of the old code, then every round of the new; on a shared
    machine the load moves between the two halves. Here each pair is one child of each, back to back;
    printed: the median (min-max) over the pairs of each child's medians.
    """
    import bench_scale  # noqa: PLC0415

    found: dict[str, list[tuple[float, float, float, float]]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory() as tmp:
        old = str(bench_scale._package_of(before, Path(tmp)))  # noqa: SLF001
        for _ in range(pairs):
            for name, path in (("before", old), ("after", None)):
                rows = bench_scale._child("append", quick=True, pythonpath=path)  # noqa: SLF001

                def median_of(start: str, rows: list[Any] = rows) -> float:
                    return float(next(r[2] for r in rows if str(r[1]).startswith(start)))

                floor, ours = median_of("raw sqlite3"), median_of("ledger.append_many")
                cpu_floor, cpu_ours = median_of("CPU time per row"), median_of("CPU time per event")
                found[name].append((ours / floor, cpu_ours, cpu_floor, cpu_ours / cpu_floor))
    for name, values in found.items():
        columns = list(zip(*values, strict=True))
        spread = [(statistics.median(c), min(c), max(c)) for c in columns]
        (w, w0, w1), (c, c0, c1), (f, f0, f1), (x, x0, x1) = spread
        print(
            f"{name}: {w:.0%} ({w0:.0%}-{w1:.0%}) of floor; CPU {c:.2f} ({c0:.2f}-{c1:.2f}) µs/event; "
            f"floor {f:.2f} ({f0:.2f}-{f1:.2f}) µs/row; {x:.2f}x ({x0:.2f}-{x1:.2f}) floor CPU"
        )


def main() -> None:
    """Run every append measurement and write bench/results/append.json."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer samples, for a smoke run")
    parser.add_argument(
        "--postgres",
        default="postgresql://postgres@127.0.0.1:5432/test",
        help="PostgreSQL URL for the same single-append figures ('' to skip)",
    )
    parser.add_argument("--stages", action="store_true", help="only the CPU split of a batched append")
    parser.add_argument("--pairs", type=int, default=0, help="only bench_scale's append, N interleaved pairs")
    parser.add_argument("--before", default="main", help="the git ref --pairs compares with")
    args = parser.parse_args()
    if args.pairs:
        interleaved_pairs(args.pairs, args.before)
        return
    if args.stages:
        with tempfile.TemporaryDirectory() as tmp:
            split = stage_split(3 if args.quick else 5, 10, Path(tmp))
        for name, micros in split.items():
            print(f"{name:>20}: {micros:5.2f} µs CPU per event (least of rounds)")
        stages = sum(split[name] for name in _STAGES)
        print(f"{'sum of stages':>20}: {stages:5.2f} (with the collector off)")
        return
    samples = 50 if args.quick else 300
    spawns = 5 if args.quick else 15
    runs = 3 if args.quick else 5
    total = 10_000 if args.quick else 50_000
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        single = {
            size: single_append_latency(size, samples, spawns, f"sqlite:///{folder / f'single-{size}.db'}")
            for size in (100, 10_000)
        }
        postgres = {}
        if args.postgres:
            schema = f"bench_{time.time_ns()}"
            postgres = {
                size: single_append_latency(size, samples, spawns, f"{args.postgres}?schema={schema}_{size}")
                for size in (100, 10_000)
            }
        row_bytes = stored_row_bytes()
        raw_single_ms = raw_sqlite_single_latency(samples, folder, row_bytes) * 1000
        batched = {}
        for batch in (100, 1000):
            ledger_rate = median_of_runs(lambda b=batch: batched_ledger_rate(total, b, folder), runs)
            raw_rate = median_of_runs(lambda b=batch: raw_sqlite_rate(total, b, folder, row_bytes), runs)
            batched[batch] = {
                "ledger_events_per_s": ledger_rate,
                "raw_sqlite_rows_per_s": raw_rate,
                "ratio_median": ledger_rate[0] / raw_rate[0],
            }
    flat = single[10_000]["p50_ms"] / single[100]["p50_ms"]
    result = {
        "single_append": single,
        "single_append_postgres": postgres,
        "raw_sqlite_single_insert_p50_ms": raw_single_ms,
        "single_append_p50_ratio_10k_over_100": flat,
        "stored_bytes_per_event": row_bytes,
        "batched": batched,
    }
    path = save("append", result)
    for size, figures in single.items():
        cold = figures["new_process_first_append"]
        print(
            f"single durable append @ {size:>6} events: p50 {figures['p50_ms']:.2f} ms, "
            f"p99 {figures['p99_ms']:.2f} ms; new process (median of {cold['samples']}): first append "
            f"{cold['op_ms']:.1f} ms in the child (open {cold['open_ms']:.1f} ms, import "
            f"{cold['import_ms']:.0f} ms), whole process {cold['process_wall_ms']:.0f} ms"
        )
    print(f"p50 ratio 10k/100: {flat:.2f} (flat = about 1)")
    print(
        f"raw sqlite single-row commit p50 {raw_single_ms:.3f} ms; ledger/raw at 10k: "
        f"{single[10_000]['p50_ms'] / raw_single_ms:.1f}x"
    )
    for size, figures in postgres.items():
        cold = figures["new_process_first_append"]
        print(
            f"postgres single append @ {size:>6} events: p50 {figures['p50_ms']:.2f} ms, "
            f"p99 {figures['p99_ms']:.2f} ms; new process first append {cold['op_ms']:.1f} ms in the child, "
            f"whole process {cold['process_wall_ms']:.0f} ms"
        )
    for batch, figures in batched.items():
        ledger_rate, raw_rate = figures["ledger_events_per_s"], figures["raw_sqlite_rows_per_s"]
        print(
            f"batched {batch}/txn: ledger {ledger_rate[0]:,.0f} ev/s (min {ledger_rate[1]:,.0f}, "
            f"max {ledger_rate[2]:,.0f}); raw sqlite {raw_rate[0]:,.0f} rows/s; "
            f"ratio {figures['ratio_median']:.2f}"
        )
    print(f"results: {path}")


if __name__ == "__main__":
    main()
