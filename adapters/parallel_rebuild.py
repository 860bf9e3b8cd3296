"""Rebuilds split over worker processes: each folds one shard of the sessions into the same rows."""

from __future__ import annotations

import multiprocessing
import os
import queue as queues
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.rebuild.blue_green import RebuildSpec
from contextledger.application.rebuild.rebuild import store_views
from contextledger.application.rebuild.shards import hand_over
from contextledger.application.views.view_runner import BatchDone, RunStats, Shard
from contextledger.domain.errors import ConfigError, StoreError, ValidationError

__all__ = ["MAX_WORKERS", "LedgerOpener", "auto_workers", "check_workers", "rebuild_in_shards"]

LedgerOpener = Callable[[str | None], Ledger]
"""Opens a ledger by URL (the composition root's ``open_ledger``); a module-level function, so that
worker processes can be handed it."""

_PARALLEL_FROM = 20_000

MAX_WORKERS = 64
"""The most rebuild processes a run starts (``check_workers``): each holds a connection and a share."""
"""Below this many notifications one process rebuilds (starting workers costs ~0.5 s each)."""


def check_workers(workers: int) -> None:
    """Refuse a number of rebuild processes that is not 0 (auto) to ``MAX_WORKERS``.

    Raises:
        ValidationError: a negative count (it ran as one), or more than ``MAX_WORKERS`` (a typo of
            100000000 built a lease name per view and worker until the process was killed).
    """
    if not 0 <= workers <= MAX_WORKERS:
        raise ValidationError(f"--workers takes 0 (auto) to {MAX_WORKERS} processes, not {workers}")


def auto_workers(notifications: int) -> int:
    """Workers for a rebuild of ``notifications`` events: one per CPU (at most 4) once it pays off."""
    if notifications < _PARALLEL_FROM:
        return 1
    return max(1, min(os.cpu_count() or 1, 4))


def _start_method(url: str) -> str:
    """How workers start: ``fork`` for an embedded store, ``spawn`` for PostgreSQL.

    A forked worker starts in milliseconds, not the ~0.5 s of a new interpreter; PostgreSQL's
    connection pool runs threads, which a fork must not copy. A forked worker opens its own
    connections and never touches the parent's; it ends with ``os._exit`` (multiprocessing's way),
    so no inherited connection is closed from the child.
    """
    embedded = url.startswith("sqlite:")
    alone = threading.active_count() == 1  # a thread holding a lock at the fork would leave it held
    return "fork" if embedded and alone and "fork" in multiprocessing.get_all_start_methods() else "spawn"


class _Orphaned(Exception):  # noqa: N818 - a signal to stop, not an error to report
    """The parent of a worker is gone."""


@dataclass(frozen=True)
class _Job:
    """What one worker is handed (picklable: the opener is a module-level function)."""

    opener: LedgerOpener
    url: str
    spec: bytes
    shard: tuple[int, int]
    parent: int


def _stop_if_orphaned(parent: int) -> None:
    if os.getppid() != parent:
        raise _Orphaned


def _shard_main(job: _Job, events: Any) -> None:
    """A worker: fold one shard of ``job.spec`` and report batches and the result on ``events``.

    A worker whose parent died (killed with -9, say) stops after its current batch commits; the
    next rebuild resumes every shard from its checkpoint.
    """
    index = job.shard[0]
    try:
        with job.opener(job.url) as ledger:
            views, reader = store_views(ledger)

            def report(done: BatchDone) -> None:
                _stop_if_orphaned(job.parent)
                events.put(("batch", index, done.tracking, done.events))

            runner = msgspec.msgpack.decode(job.spec, type=RebuildSpec).runner(
                ledger, reader, views, shard=Shard(*job.shard), on_batch=report
            )
            runner.context.release_at_head = True  # memory holds this share's sessions in flight
            stats = runner.run()
            checkpoints = runner.runner.checkpoints()
        events.put(("done", index, msgspec.msgpack.encode(stats), checkpoints))
    except _Orphaned:
        return
    except BaseException as error:  # noqa: BLE001 - every failure is reported to the parent
        events.put(("error", index, type(error).__name__, str(error)))


def rebuild_in_shards(
    opener: LedgerOpener,
    url: str,
    spec: RebuildSpec,
    workers: int,
    *,
    on_progress: Callable[[int], None] | None = None,
) -> RunStats:
    """Run ``workers`` processes, each folding one shard of the sessions; return their merged stats.

    Each shard has its own checkpoint (``<view>@i/n``) committed with its rows, so a killed rebuild
    resumes per shard when run again with the same number of workers. ``on_progress`` gets the
    events folded so far (all shards).

    While the workers run, this process holds the leases of the views' own checkpoints, so no
    tail folds the same rows meanwhile; at the end it hands those checkpoints over (``hand_over``).

    Raises:
        ConfigError: the ledger is in memory (it lives in one process).
        ValidationError: ``workers`` is not 1 to ``MAX_WORKERS``.
        ProjectionLockedError: a tail or another rebuild holds one of the views.
        StoreError: a worker failed (its error is named); the other shards' committed batches stay.
    """
    check_workers(workers)
    if url.startswith("memory:"):
        raise ConfigError("a memory:// ledger lives in one process: rebuild it with one worker")
    with opener(url) as ledger:
        store, reader = store_views(ledger)
        with spec.runner(ledger, reader, store).runner.leases():
            stats, checkpoints = _run_workers(opener, url, spec, workers, on_progress)
            hand_over(store, checkpoints)
    return stats


def _run_workers(
    opener: LedgerOpener,
    url: str,
    spec: RebuildSpec,
    workers: int,
    on_progress: Callable[[int], None] | None,
) -> tuple[RunStats, dict[str, int]]:
    context: Any = multiprocessing.get_context(_start_method(url))
    events = context.Queue()
    encoded = msgspec.msgpack.encode(spec)
    processes = [
        context.Process(
            target=_shard_main,
            args=(_Job(opener, url, encoded, (i, workers), os.getpid()), events),
            name=f"rebuild-{i}",
        )
        for i in range(workers)
    ]
    for process in processes:
        process.start()
    results = _Results(workers, on_progress)
    try:
        while not results.complete():
            try:
                results.take(events.get(timeout=1.0))
            except queues.Empty:
                if any(p.is_alive() for p in processes):
                    continue
                try:  # every worker has exited: what each put is in the pipe, perhaps not yet readable
                    results.take(events.get(timeout=5.0))
                except queues.Empty:
                    codes = ", ".join(f"{p.name} exit {p.exitcode}" for p in processes)
                    results.failures.append(f"a worker exited without reporting ({codes})")
                    break
    finally:
        for process in processes:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
    if results.failures:
        raise StoreError("rebuild failed: " + "; ".join(results.failures))
    return _merged(list(results.done.values())), results.checkpoints


class _Results:
    """What the workers reported: events folded per shard, finished shards, failures."""

    def __init__(self, workers: int, on_progress: Callable[[int], None] | None) -> None:
        self.workers = workers
        self.on_progress = on_progress
        self.folded = [0] * workers
        self.done: dict[int, RunStats] = {}
        self.failures: list[str] = []
        self.checkpoints: dict[str, int] = {}
        """Each view's position every shard has passed (its unsharded checkpoint after the run)."""

    def complete(self) -> bool:
        return len(self.done) + len(self.failures) >= self.workers

    def take(self, message: tuple[Any, ...]) -> None:
        kind, index, *rest = message
        if kind == "batch":
            self.folded[index] += int(rest[1])
            if self.on_progress is not None:
                self.on_progress(sum(self.folded))
        elif kind == "done":
            self.done[index] = msgspec.msgpack.decode(rest[0], type=RunStats)
            for name, position in rest[1].items():
                base = name.rpartition("@")[0] or name
                self.checkpoints[base] = min(self.checkpoints.get(base, position), position)
        else:
            self.failures.append(f"shard {index}: {rest[0]}: {rest[1]}")


def _merged(parts: list[RunStats]) -> RunStats:
    total = RunStats(
        started_at=min((p.started_at for p in parts), default=0),
        tracking=min((p.tracking for p in parts), default=0),
    )
    for part in parts:
        total.batches += part.batches
        total.events += part.events
        total.failed.update(part.failed)
    return total
