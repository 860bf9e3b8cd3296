"""PostgreSQL writers in parallel (issue 22, ADR 0031): each figure next to raw psycopg work in the same run.

Run: .venv/bin/python bench/bench_pg_writers.py [--quick] [--before REF] [--writers 1 4 16] [--statement]
      [--notify-interval S ...] [--per-writer N] [--rounds R] [--load SECONDS] [--load-writers N]
      [--only writers append load]

- ``writers``: N processes each appending one user message at a time to its own session, aggregate
  appends/s, next to N processes doing raw single-row INSERT + COMMIT of the same bytes into a table of the
  same shape (issue 22 goal: >= 50 % of raw at every N). Rounds interleave raw, before (``--before REF``:
  the package as it was at that git ref, built with ``git archive``) and after. ``--statement`` adds N
  processes sending the append function's own prepared statement on plain connections, with no ledger around
  it: the same server work per append with a bare client (ADR 0078). ``--notify-interval S`` adds N ledger
  writers whose URL sets ``notify_interval=S`` (the default is 0.05 s): what the NOTIFY that wakes live tails
  costs the writers, against how late a tail may learn of a commit (ADR 0047).
- ``append``: one durable append to a session of 1k and of 40k events, next to one raw INSERT + COMMIT
  (goal: 40k within 1.3x of 1k).
- ``load``: N writers on N sessions, the summary worker (``contextledger worker``, extractive) and a
  following view (the context view, every audit view, woken by LISTEN/NOTIFY) for ``--load`` seconds;
  aggregate events/s next to N raw INSERT + COMMIT processes for as long, and the view's lag (from an
  event's timestamp, taken before its append, to the view folding it): p50, p99, max.

Every figure is a median with min-max over the rounds; ratios are to a floor measured in the same run.
Results: bench/results/pg_writers.json; the table is printed as Markdown.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psycopg

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from harness import machine, percentile, save

PG = os.environ.get("CONTEXTLEDGER_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test").split("?")[0]
PAYLOAD = "x" * 300
INSERT = "INSERT INTO {} (originator_id, originator_version, topic, state) VALUES (%s, %s, %s, %s)"
WARMUP = int(os.environ.get("BENCH_PG_WARMUP", "20"))
"""Appends (rows) each writer process makes before it counts: connections, prepared statements and the
server's plan caches exist by then, for raw and ours alike (``--warmup``)."""

Row = tuple[str, str, float, float, float, str, str]
"""(section, measurement, median, min, max, unit, ratio text)."""


def _stats(values: Sequence[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


def _fmt(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}"


# -- processes ---------------------------------------------------------------------------------


def _schema() -> tuple[str, str]:
    schema = f"bench_w_{uuid.uuid4().hex[:10]}"
    return schema, f"{PG}?schema={schema}"


def _drop(schema: str) -> None:
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _raw_table(schema: str) -> str:
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        conn.execute(
            f'CREATE TABLE "{schema}".raw (originator_id text, originator_version bigint, topic text, '
            "state bytea, notification_id bigserial, PRIMARY KEY (originator_id, originator_version))"
        )
    return f'"{schema}".raw'


def _until(start_at: float) -> None:
    while time.time() < start_at:
        time.sleep(0.001)


def _backends() -> dict[int, float]:
    """The server processes of this process's connections, each with its CPU seconds so far.

    Found by the local ports of this process's TCP sockets to the server (``pg_stat_activity.client_port``);
    their CPU time is read from ``/proc`` (a server on this machine). Empty when that cannot be read.
    """
    inodes = set()
    for fd in Path("/proc/self/fd").iterdir():
        try:
            link = str(fd.readlink())
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    port = f":{int(psycopg.conninfo.conninfo_to_dict(PG).get('port') or 5432):04X}"
    ports = []
    for line in Path("/proc/self/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[9] in inodes and fields[2].endswith(port):
            ports.append(int(fields[1].split(":")[1], 16))
    with psycopg.connect(PG, autocommit=True) as conn:
        pids = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE client_port = ANY(%s) AND pid <> pg_backend_pid()",
            (ports,),
        ).fetchall()
    found: dict[int, float] = {}
    for (pid,) in pids:
        try:  # nanoseconds on a CPU (``stat``'s utime + stime count 10 ms ticks)
            found[pid] = int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9
        except OSError:
            return {}
    return found


def _report(queue: Any, done: int, wall: float, cpu: float, before: dict[int, float]) -> None:
    """Put (operations, wall seconds, client CPU seconds, server CPU seconds or -1) on the queue."""
    after = _backends()
    server = sum(t - before.get(pid, 0.0) for pid, t in after.items()) if before and after else -1.0
    queue.put((done, wall, cpu, server))


def _timed(write: Callable[[int], object], count: int, seconds: float, start_at: float, queue: Any) -> None:
    """From ``start_at``, ``write(1)``, ``write(2)``... ``count`` times (or for ``seconds`` when > 0); report.

    The server's CPU is read before and after (``_backends``), so the warm-up before this call is not counted.
    """
    before = _backends()
    _until(start_at)
    start, cpu = time.perf_counter(), time.process_time()
    done = 0
    while (done < count) if seconds <= 0 else (time.perf_counter() - start < seconds):
        done += 1
        write(done)
    _report(queue, done, time.perf_counter() - start, time.process_time() - cpu, before)


def _ours(url: str, session_id: str, count: int, seconds: float, start_at: float, queue: Any) -> None:  # noqa: PLR0917
    """Append ``count`` messages (or for ``seconds`` when > 0) after ``WARMUP`` uncounted ones; report."""
    import contextledger  # noqa: PLC0415

    with contextledger.open_ledger(url) as ledger:
        ledger.version(session_id)
        for _ in range(WARMUP):
            ledger.add_user_message(session_id, PAYLOAD)
        time.sleep(0.05)  # a NOTIFY still due is sent before the CPU is read
        _timed(lambda _: ledger.add_user_message(session_id, PAYLOAD), count, seconds, start_at, queue)


def _statement(  # noqa: PLR0917
    url: str, schema: str, session_id: str, count: int, seconds: float, start_at: float, queue: Any
) -> None:
    """``_ours`` without the ledger: the append function through its prepared statement on a plain connection.

    The same server work per append as ``_ours`` (``OneEventAppend``, the statement an append sends), with
    none of the client's layers (validation, drafting, the rules' state, encoding, the pool, the NOTIFY): what
    is left of the gap between ``_ours`` and ``_raw`` once the server's side is the same is the client's.
    """
    import contextledger  # noqa: PLC0415
    from contextledger.adapters.store.postgres_append import OneEventAppend  # noqa: PLC0415

    with contextledger.open_ledger(url) as ledger:
        ledger.add_user_message(session_id, PAYLOAD)
        version = ledger.version(session_id)
    with psycopg.connect(PG, autocommit=True) as conn:
        row = conn.execute(
            f'SELECT topic, state FROM "{schema}".contextledger_events WHERE originator_id = %s '
            "AND originator_version = %s",
            (session_id, version),
        ).fetchone()
    assert row is not None
    topic, state = row  # the bytes ``_ours`` stores for the same message (new ids and times aside)
    append = OneEventAppend(schema, "contextledger_events")
    with psycopg.connect(PG, autocommit=True) as conn:
        for _ in range(WARMUP):
            version += 1
            append.run(conn, session_id, version, topic, state)
        _timed(
            lambda i: append.run(conn, session_id, version + i, topic, state), count, seconds, start_at, queue
        )


def _raw(table: str, stream: str, count: int, seconds: float, start_at: float, queue: Any) -> None:  # noqa: PLR0917
    """INSERT + COMMIT ``count`` rows (or for ``seconds``) after ``WARMUP`` uncounted ones; report."""
    with psycopg.connect(PG, autocommit=True) as conn:
        for version in range(-WARMUP, 0):
            conn.execute(INSERT.format(table), (stream, version, "t", PAYLOAD.encode()))
        _timed(
            lambda i: conn.execute(INSERT.format(table), (stream, i, "t", PAYLOAD.encode())),
            count, seconds, start_at, queue,
        )  # fmt: skip


def _parallel(target: Callable[..., None], args: list[tuple[Any, ...]]) -> dict[str, float]:
    """Start one process per argument tuple at one instant.

    Returns the aggregate operations per second (``rate``) and the CPU per operation in seconds, of the
    client processes (``client``) and of their server processes (``server``, -1 when not readable).
    """
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    start_at = time.time() + 2.0 + 0.15 * len(args)
    procs = [ctx.Process(target=target, args=(*a, start_at, queue)) for a in args]
    for p in procs:
        p.start()
    results = [queue.get(timeout=900) for _ in procs]
    for p in procs:
        p.join()
    done = sum(r[0] for r in results)
    server = -1.0 if any(r[3] < 0 for r in results) else sum(r[3] for r in results) / done
    return {
        "rate": done / max(r[1] for r in results),
        "client": sum(r[2] for r in results) / done,
        "server": server,
    }


def one_writers(
    kind: str, n: int, per_writer: int, seconds: float = 0.0, notify: float | None = None
) -> dict[str, float]:
    """One measurement in a fresh schema: ``kind`` ours, statement or raw; N processes (``_parallel``'s).

    ``notify``: the ledger writers' ``notify_interval`` (their URL's; else the ledger's default).
    """
    schema, url = _schema()
    try:
        if kind == "raw":
            table = _raw_table(schema)
            return _parallel(_raw, [(table, f"raw-{i}", per_writer, seconds) for i in range(n)])
        import contextledger  # noqa: PLC0415

        with contextledger.open_ledger(url) as ledger:
            sessions = [ledger.start_session(system_prompt="bench") for _ in range(n)]
        if kind == "statement":
            return _parallel(_statement, [(url, schema, s, per_writer, seconds) for s in sessions])
        writer_url = url if notify is None else f"{url}&notify_interval={notify:g}"
        return _parallel(_ours, [(writer_url, s, per_writer, seconds) for s in sessions])
    finally:
        _drop(schema)


def one_append(samples: int, sizes: tuple[int, int]) -> dict[str, list[float]]:
    """Single appends at two session lengths, interleaved with one raw INSERT + COMMIT (seconds each)."""
    import contextledger  # noqa: PLC0415

    schema, url = _schema()
    found: dict[str, list[float]] = {"raw": [], str(sizes[0]): [], str(sizes[1]): []}
    try:
        table = _raw_table(schema)
        with contextledger.open_ledger(url) as ledger, psycopg.connect(PG, autocommit=True) as raw:
            sessions = {}
            for size in sizes:
                sessions[size] = ledger.start_session(system_prompt="bench")
                while ledger.version(sessions[size]) < size:
                    ledger.append_many(sessions[size], [{"role": "user", "content": PAYLOAD}] * 1000)
            for version in range(1, samples + 1):
                for size in sizes:
                    start = time.perf_counter()
                    ledger.add_user_message(sessions[size], PAYLOAD)
                    found[str(size)].append(time.perf_counter() - start)
                start = time.perf_counter()
                raw.execute(INSERT.format(table), ("raw", version, "t", PAYLOAD.encode()))
                found["raw"].append(time.perf_counter() - start)
    finally:
        _drop(schema)
    return found


# -- the load run ----------------------------------------------------------------------------------


class _LagView:
    """A view that stores nothing and notes, per event, the seconds from its timestamp to its fold."""

    name = "bench-lag"

    def __init__(self) -> None:
        self.failed: dict[str, str] = {}
        self.lags: list[float] = []
        self.last = 0

    def begin(self, tracking: int) -> None:
        """Nothing to prepare."""

    def fold(self, after: int, upto: int, batch: Sequence[Any]) -> dict[str, Any]:
        """Note each user message's lag."""
        del after
        now = time.time()
        for n in batch:
            at = getattr(n.event, "at", None)
            if at is not None and type(n.event).__name__ == "UserMessageAdded":
                self.lags.append(now - at.timestamp())
        self.last = upto
        return {}


def _follower(url: str, stop_file: str, queue: Any) -> None:
    """Follow the ledger with the context view, every audit view and the lag view until told to stop."""
    import contextledger  # noqa: PLC0415
    from contextledger.application.rebuild.audit_views import AUDIT_VIEWS, audit_views  # noqa: PLC0415
    from contextledger.application.rebuild.projection_runner import ProjectionRunner  # noqa: PLC0415
    from contextledger.application.rebuild.rebuild import store_views  # noqa: PLC0415

    with contextledger.open_ledger(url) as ledger:
        views, reader = store_views(ledger)
        lag = _LagView()
        runner = ProjectionRunner(ledger, reader, views, also=[*audit_views(ledger, views, AUDIT_VIEWS), lag])
        waiter = ledger.ports.waiter() if ledger.ports.waiter else None
        target = [0]

        def stop() -> bool:
            if not Path(stop_file).exists():
                return False
            if not target[0]:
                target[0] = int(Path(stop_file).read_text() or 0)
            return lag.last >= target[0]

        try:
            runner.follow(stop=stop, waiter=waiter, poll=0.5)
        finally:
            if waiter is not None:
                waiter.close()
        queue.put(lag.lags)


def one_load(writers: int, seconds: float) -> dict[str, Any]:
    """N writers + the summary worker + a following view for ``seconds``; events/s and view lag."""
    import contextledger  # noqa: PLC0415
    from contextledger.application.rebuild.rebuild import store_views  # noqa: PLC0415

    schema, url = _schema()
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory() as folder:
        stop_file = str(Path(folder) / "stop")
        try:
            with contextledger.open_ledger(url) as ledger:
                sessions = [ledger.start_session(system_prompt="bench") for _ in range(writers)]
            lags: Any = ctx.Queue()
            follower = ctx.Process(target=_follower, args=(url, stop_file, lags))
            follower.start()
            cli = str(Path(sys.executable).with_name("contextledger"))
            worker = subprocess.Popen(
                [cli, "worker", "--db", url, "--summarizer", "extractive"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            try:
                rate = _parallel(_ours, [(url, s, 0, seconds) for s in sessions])["rate"]
            finally:
                worker.send_signal(signal.SIGINT)
                try:
                    worker.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    worker.kill()
            with contextledger.open_ledger(url) as ledger:
                head = store_views(ledger)[1].head()
            Path(stop_file).write_text(str(head))
            samples: list[float] = lags.get(timeout=900)
            follower.join()
        finally:
            _drop(schema)
    raw = one_writers("raw", writers, 0, seconds)["rate"]
    return {"rate": rate, "raw": raw, "lags": samples}


# -- orchestration ---------------------------------------------------------------------------------


def _package_of(ref: str, folder: Path) -> Path:
    """The ``contextledger`` package as it was at git ``ref``, assembled for PYTHONPATH (no install)."""
    tree = folder / "tree"
    tree.mkdir()
    git, tar = shutil.which("git") or "git", shutil.which("tar") or "tar"
    archive = subprocess.run([git, "archive", ref], check=True, capture_output=True, cwd=HERE.parent).stdout
    subprocess.run([tar, "-x", "-C", str(tree)], input=archive, check=True)
    package = folder / "pkg" / "contextledger"
    shutil.copytree(tree / "api", package)
    for sub in ("domain", "projections", "application", "adapters"):
        shutil.copytree(tree / sub, package / sub)
    return package.parent


def _child(args: list[str], pythonpath: str | None = None) -> Any:
    """Run one measurement in a fresh interpreter (with ``pythonpath`` first: the code before)."""
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    done = subprocess.run(
        [sys.executable, str(Path(__file__)), "--child", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-3000:])
        raise SystemExit(f"child {args} failed")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_writers(
    counts: list[int],
    per_writer: int,
    rounds: int,
    before: str | None,
    *,
    statement: bool = False,
    notify: Sequence[float] = (),
) -> list[Row]:
    """Appends/s and CPU per append per writer count: raw, before and after, interleaved per round.

    The three take turns at going first (round 1: raw, before, after; round 2: before, after, raw; ...): the
    machine's pace drifts within a round, and the events table grows with every run of the codes.

    With ``statement``, each round also runs the append function alone (``_statement``), in the code after;
    with ``notify``, the code after's writers once more per interval given, with that ``notify_interval``.
    """
    rows: list[Row] = []
    for n in counts:
        found: dict[str, list[dict[str, float]]] = {"raw": [], "before": [], "after": [], "statement": []}
        found.update({_notify_label(s): [] for s in notify})
        ours = ["writers", "ours", str(n), str(per_writer)]
        runs: list[tuple[str, list[str], str | None]] = [
            ("raw", ["writers", "raw", str(n), str(per_writer)], None),
            *([("before", ours, before)] if before else []),
            ("after", ours, None),
        ]
        for index in range(rounds):
            shift = index % len(runs)  # each round starts with the next: no drift favours one
            for label, args, pythonpath in runs[shift:] + runs[:shift]:
                found[label].append(_child(args, pythonpath))
            if statement:
                found["statement"].append(_child(["writers", "statement", str(n), str(per_writer)]))
            for interval in notify:
                found[_notify_label(interval)].append(_child([*ours, f"{interval:g}"]))
            print(
                f"# writers {n}: {[round(v[-1]['rate']) for v in found.values() if v]}",
                file=sys.stderr,
                flush=True,
            )
        rows += _writer_rows(n, found)
    return rows


def _notify_label(interval: float) -> str:
    """The label of the code after's writers with ``notify_interval=interval``."""
    return f"after, notify_interval={interval:g} s"


def _cpu(figures: dict[str, float]) -> float:
    """Client + server CPU per operation in microseconds (client alone when the server's is unknown)."""
    return (figures["client"] + max(figures["server"], 0.0)) * 1e6


def _writer_rows(n: int, found: dict[str, list[dict[str, float]]]) -> list[Row]:
    """The rows of one writer count: rates, then CPU per operation (client + server), as ratios to raw."""
    r = _stats([f["rate"] for f in found["raw"]])
    rows: list[Row] = [("writers", f"{n} raw INSERT + COMMIT processes (floor)", *r, "rows/s", "1.00x floor")]
    for label in [k for k in found if k not in {"raw", "statement"}]:  # before, after, after at each interval
        if found[label]:
            s = _stats([f["rate"] for f in found[label]])
            rows.append(
                ("writers", f"{n} writer processes, one session each ({label})", *s, "appends/s",
                 f"{s[0] / r[0]:.0%} of floor (goal >= 50 %)")
            )  # fmt: skip
    if found.get("statement"):
        s = _stats([f["rate"] for f in found["statement"]])
        rows.append(
            ("writers", f"{n} processes, the append function alone (its prepared statement, no ledger)", *s,
             "appends/s", f"{s[0] / r[0]:.0%} of floor (the server's work of an append, a bare client)")
        )  # fmt: skip
    known = all(f["server"] >= 0 for v in found.values() for f in v)
    what = "client + server" if known else "client only (server CPU not readable)"
    c = _stats([_cpu(f) for f in found["raw"]])
    rows.append(("writers", f"{n} raw: CPU per row, {what}", *c, "us", "1.00x floor"))
    for label in [k for k in found if k != "raw"]:
        if found[label]:
            s = _stats([_cpu(f) for f in found[label]])
            server = statistics.median(f["server"] * 1e6 for f in found[label])
            floor = statistics.median(f["server"] * 1e6 for f in found["raw"])
            split = f"; server {server:,.0f} us vs {floor:,.0f}"
            rows.append(
                ("writers", f"{n} writers: CPU per append, {what} ({label})", *s, "us",
                 f"{s[0] / c[0]:.2f}x floor (goal <= 2)" + (split if known else ""))
            )  # fmt: skip
    return rows


def run_append(samples: int) -> list[Row]:
    """Single append at 1k and 40k events next to one raw INSERT + COMMIT."""
    found = _child(["append", str(samples)])
    f = _stats([v * 1e3 for v in found["raw"]])
    rows: list[Row] = [("append", "raw INSERT + COMMIT, 1 row (floor)", *f, "ms", "1.00x floor")]
    small = statistics.median(found["1000"]) * 1e3
    for size in ("1000", "40000"):
        s = _stats([v * 1e3 for v in found[size]])
        ratio = f"{s[0] / f[0]:.2f}x floor" + (
            f"; {s[0] / small:.2f}x @1,000 (goal <= 1.3)" if size != "1000" else ""
        )
        rows.append(("append", f"single append @{int(size):,} events", *s, "ms", ratio))
    return rows


def run_load(writers: int, seconds: float) -> list[Row]:
    """The load run: events/s vs raw parallel INSERTs, and the following view's lag."""
    found = _child(["load", str(writers), str(seconds)])
    lags = [v * 1e3 for v in found["lags"]]
    rate, raw = found["rate"], found["raw"]
    return [
        ("load", f"{writers} raw INSERT + COMMIT processes, {seconds:g} s (floor)", raw, raw, raw, "rows/s",
         "1.00x"),
        ("load", f"{writers} writers + summary worker + following view, {seconds:g} s", rate, rate, rate,
         "events/s", f"{rate / raw:.0%} of floor"),
        ("load", f"view lag p50 ({len(lags):,} events)", percentile(lags, 0.5), min(lags), max(lags), "ms",
         ""),
        ("load", "view lag p99", percentile(lags, 0.99), min(lags), max(lags), "ms", ""),
    ]  # fmt: skip


def table(rows: list[Row]) -> str:
    """Markdown table of the rows."""
    lines = [
        "| section | measurement | median | min | max | unit | ratio |",
        "|---|---|---:|---:|---:|---|---|",
    ]
    lines.extend(
        f"| {s} | {m} | {_fmt(a)} | {_fmt(b)} | {_fmt(c)} | {u} | {r} |" for s, m, a, b, c, u, r in rows
    )
    return "\n".join(lines)


def _run_child(args: list[str]) -> Any:
    if args[0] == "writers":
        notify = float(args[4]) if len(args) > 4 else None
        return one_writers(args[1], int(args[2]), int(args[3]), notify=notify)
    if args[0] == "append":
        return one_append(int(args[1]), (1_000, 40_000))
    if args[0] == "load":
        return one_load(int(args[1]), float(args[2]))
    raise SystemExit(f"unknown child {args}")


def main() -> None:
    """Run the chosen sections and print one table."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer appends and rounds, a 20 s load run")
    parser.add_argument("--before", default="", help="a git ref: the writers section runs on it too")
    parser.add_argument("--writers", nargs="*", type=int, default=[1, 4, 16])
    parser.add_argument("--per-writer", type=int, default=0, help="appends per writer (200; quick 60)")
    parser.add_argument("--rounds", type=int, default=0, help="rounds per writer count (default 5; quick 3)")
    parser.add_argument("--load", type=float, default=0.0, help="load run seconds (60; quick 20)")
    parser.add_argument("--load-writers", type=int, default=8)
    parser.add_argument("--only", nargs="*", default=["writers", "append", "load"])
    parser.add_argument("--warmup", type=int, default=WARMUP, help="uncounted appends per writer (20)")
    parser.add_argument(
        "--statement", action="store_true", help="writers: also the append function alone, without the ledger"
    )
    parser.add_argument(
        "--notify-interval",
        nargs="*",
        type=float,
        default=[],
        help="writers: also the ledger's writers with notify_interval=S in their URL (default 0.05 s), per S",
    )
    parser.add_argument("--child", nargs="*", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        sys.stdout.write(json.dumps(_run_child(args.child)) + "\n")
        return
    os.environ["BENCH_PG_WARMUP"] = str(args.warmup)  # read by the children
    per_writer = args.per_writer or (60 if args.quick else 200)
    rounds = args.rounds or (3 if args.quick else 5)
    seconds = args.load or (20.0 if args.quick else 60.0)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as folder:
        old = str(_package_of(args.before, Path(folder))) if args.before else None
        if "writers" in args.only:
            rows += run_writers(
                args.writers, per_writer, rounds, old, statement=args.statement, notify=args.notify_interval
            )
        if "append" in args.only:
            rows += run_append(30 if args.quick else 100)
        if "load" in args.only:
            rows += run_load(args.load_writers, seconds)
    text = table(rows)
    print(text)
    facts = machine()
    print(f"\n{facts['cpus']} CPUs, load1 {facts['load1']}, Python {facts['python']}, {facts['when']}")
    save("pg_writers", {"before_ref": args.before, "rows": rows, "markdown": text, "machine": facts})


if __name__ == "__main__":
    main()
