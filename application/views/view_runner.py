"""Checkpointed views: one catch-up loop folds store notifications into any number of persistent views.

Each batch of notifications is read once (a shard decodes only its sessions' events), handed to
every view, and every view's rows are committed with its checkpoint in ONE transaction: after a
crash the runner resumes after the last committed batch and redoes none before it. Notification
ids may have gaps (a rolled-back PostgreSQL transaction consumes ids): a batch simply skips them.
One runner holds each checkpoint (a lease). After catching up, ``follow`` tails new notifications,
woken by the store (LISTEN/NOTIFY on PostgreSQL, a cheap poll elsewhere).
"""

from __future__ import annotations

import functools
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from typing import Protocol, runtime_checkable

import msgspec
from contextledger.application.kernel.collector import collector_paused
from contextledger.application.kernel.handoffs import quick_handoffs
from contextledger.application.kernel.messages import SIDE_STREAM_SEPARATOR
from contextledger.domain.errors import ValidationError
from contextledger.domain.ports import (
    Notification,
    NotificationBatch,
    NotificationReader,
    NotificationWaiter,
    ProjectionCommit,
    ProjectionStore,
    ScansAhead,
)

__all__ = [
    "BATCH_SIZE",
    "BatchDone",
    "Finishes",
    "KnownRows",
    "ReadsAhead",
    "RunStats",
    "Shard",
    "View",
    "ViewRunner",
    "session_of",
    "split_stream",
]

BATCH_SIZE = 5_000
"""Notifications folded and committed per transaction (one per event measured ~20x slower; 5,000
measured ~5% faster than 1,000 on the rebuild benchmark, and a session touched by every batch has
its state written once a batch)."""

READ_AHEAD = 2
"""Batches read and handed to the views' ``ahead`` before the batch they fold now (``ReadsAhead``). A first
rebuild's tokenizer thread counts them meanwhile; with one batch queued it waited for the main thread
~22 % of the run, and the main thread for it whenever a batch's texts took longer than the fold before."""

FIRST_BATCH_SHARE = 8
"""A catch-up's first batch is this share of ``batch_size``, and each one after it twice the one before, up to
``batch_size``: nothing is counted ahead of the first fold, which waited for a whole batch's texts (a first
rebuild's main thread waited ~0.6 s there; with a batch an eighth as large, ~0.07 s)."""

Rows = dict[str, tuple[int, bytes]]
"""A view's rows: key -> (position folded to, bytes)."""


def session_of(stream_id: str) -> str:
    """The session a stream belongs to: ``<session>`` or ``<session>::<kind>``."""
    return stream_id.partition(SIDE_STREAM_SEPARATOR)[0]


def split_stream(stream_id: str) -> tuple[str, str]:
    """A stream's session and kind: ``("s", "")`` for session ``s``, ``("s", "calls")`` for ``s::calls``."""
    session_id, _, kind = stream_id.partition(SIDE_STREAM_SEPARATOR)
    return session_id, kind


@functools.lru_cache(maxsize=65_536)
def _shard_of(stream_id: str, count: int) -> int:
    """The shard of a stream's session (remembered: a rebuild asks once per event, streams repeat)."""
    return zlib.crc32(session_of(stream_id).encode()) % count


class Shard(msgspec.Struct, frozen=True):
    """One of ``count`` runners that together fold every session: this one folds ``index``'s share."""

    index: int = 0
    count: int = 1

    def __post_init__(self) -> None:
        """Refuse an index outside ``0..count-1``."""
        if self.count < 1 or not 0 <= self.index < self.count:
            raise ValidationError(f"shard {self.index} of {self.count} does not exist")

    def holds(self, stream_id: str) -> bool:
        """Whether this shard folds the session of ``stream_id`` (a stable hash of its id)."""
        if self.count == 1:
            return True
        return _shard_of(stream_id, self.count) == self.index

    def checkpoint(self, view: str) -> str:
        """The name of this shard's checkpoint of ``view`` (the view's own name when unsharded)."""
        return view if self.count == 1 else f"{view}@{self.index}/{self.count}"


class View(Protocol):
    """A persistent view the runner keeps: named rows folded from notifications."""

    @property
    def name(self) -> str:
        """The name of its rows (and of its checkpoint, per shard)."""
        ...

    failed: dict[str, str]
    """Keys that could not be folded, with why (the rest of the batch still commits)."""

    def begin(self, tracking: int) -> None:
        """Called before each catch-up with the view's checkpoint (0: it has no rows yet)."""
        ...

    def fold(self, after: int, upto: int, batch: Sequence[Notification]) -> dict[str, Rows]:
        """Fold a batch (ids in ``(after, upto]``); return rows by the name they are stored under.

        Rows under the view's own name commit with its checkpoint; rows under other names (shared
        caches, such as per-event token counts) commit in the same transaction without one.
        """
        ...


@runtime_checkable
class ReadsAhead(Protocol):
    """A view that starts work on coming batches while the current one folds (optional, next to ``View``)."""

    def ahead(self, after: int, upto: int, batch: Sequence[Notification]) -> None:
        """Called with each batch ``READ_AHEAD`` folds before ``fold`` gets it (same arguments), in order."""
        ...


@runtime_checkable
class Finishes(Protocol):
    """A view that ends each catch-up with work of its own (optional, next to ``View``)."""

    def finish(self) -> None:
        """Called when the reader has nothing more, after the last batch committed (writes kept back)."""
        ...


class KnownRows:
    """Which of a view's rows an instance can vouch for, so that it reads back only rows that may exist.

    When the view starts empty, rows exist only for the sessions this instance wrote; that stays
    true while it resumes exactly where it left off. If its checkpoint moved meanwhile (another
    runner folded the view), any row may exist and every touched session's row is read back.
    """

    def __init__(self) -> None:
        self.written: set[str] = set()
        self.complete = False
        """Whether rows exist only for the sessions in ``written``."""
        self.folded_upto = 0

    def begin(self, tracking: int) -> bool:
        """Note the checkpoint a catch-up starts from; return whether this instance's memory is current."""
        current = tracking == self.folded_upto and (tracking > 0 or self.complete)
        if tracking == 0:
            self.written.clear()
        self.complete = tracking == 0 or (self.complete and current)
        self.folded_upto = tracking
        return current

    def may_exist(self, session_id: str) -> bool:
        """Whether a row of ``session_id`` may be in the store."""
        return not self.complete or session_id in self.written


class BatchDone(msgspec.Struct, frozen=True):
    """One committed batch: the notification ids it covered, its events and the rows it wrote."""

    first_id: int
    tracking: int
    events: int
    sessions: int


class RunStats(msgspec.Struct):
    """What a catch-up did: batches committed, events folded, tracking before and after, failed keys."""

    started_at: int = 0
    tracking: int = 0
    batches: int = 0
    events: int = 0
    failed: dict[str, str] = msgspec.field(default_factory=dict)


def _past(batch: list[Notification], at: int, after: int) -> list[Notification]:
    """The notifications of a batch (ids after ``after``) that a view at ``at`` has not folded yet."""
    return batch if at <= after else [n for n in batch if n.id > at]


class ViewRunner:
    """Keeps views up to date from one notification stream, each view checkpointed with its rows.

    Args:
        reader: Notifications of every stream in store order.
        store: Where rows, checkpoints and leases live.
        views: The views to keep (each resumes from its own checkpoint).
        batch_size: Notifications per transaction.
        shard: Which share of the sessions this runner folds (default: all of them).
        on_batch: Called after each committed batch (progress bars).
    """

    def __init__(
        self,
        reader: NotificationReader,
        store: ProjectionStore,
        views: Sequence[View],
        *,
        batch_size: int = BATCH_SIZE,
        shard: Shard | None = None,
        on_batch: Callable[[BatchDone], None] | None = None,
    ) -> None:
        """Wire the runner; nothing is read until ``run``."""
        if not views:
            raise ValidationError("a view runner needs at least one view")
        self.reader = reader
        self.store = store
        self.views = list(views)
        self.batch_size = batch_size
        self.shard = shard or Shard()
        self.on_batch = on_batch

    def checkpoints(self) -> dict[str, int]:
        """Each view's checkpoint name and position."""
        return {name: self.store.load_tracking(name) for name in self._names()}

    def run(self) -> RunStats:
        """Take the leases, fold every notification after the checkpoints, release the leases."""
        with self.leases():
            return self.catch_up()

    def follow(
        self,
        *,
        stop: Callable[[], bool],
        waiter: NotificationWaiter | None = None,
        poll: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> RunStats:
        """Catch up, then tail new notifications until ``stop()``: woken by ``waiter`` or every ``poll`` s."""
        total = RunStats()
        with self.leases():
            while True:
                stats = self.catch_up()
                total.batches += stats.batches
                total.events += stats.events
                total.tracking = stats.tracking
                total.failed.update(stats.failed)
                if stop():
                    return total
                if waiter is None:
                    sleep(poll)
                else:
                    waiter.wait(stats.tracking, poll)
                for name in self._names():
                    self.store.acquire(name)  # renews the leases while idle

    def catch_up(self) -> RunStats:
        """Fold and commit batches until the reader has nothing after the checkpoints.

        Reads ahead and commits run on other threads meanwhile, so the GIL is handed over quickly
        (``quick_handoffs``) and the collector paused.
        """
        with collector_paused(), quick_handoffs():
            return self._catch_up()

    def _names(self) -> list[str]:
        return [self.shard.checkpoint(view.name) for view in self.views]

    @contextmanager
    def leases(self) -> Iterator[None]:
        """Hold every checkpoint's one-writer lease (a sharded rebuild's parent holds the unsharded ones)."""
        with ExitStack() as held:
            for name in self._names():
                held.callback(self.store.acquire(name).release)
            yield

    def _catch_up(self) -> RunStats:
        positions = self.checkpoints()
        names = self._names()
        for view, name in zip(self.views, names, strict=True):
            view.failed = {}
            view.begin(positions[name])
        tracking = min(positions.values())
        stats = RunStats(started_at=tracking, tracking=tracking)
        keep = None if self.shard.count == 1 else self.shard.holds
        queued: deque[NotificationBatch] = deque()  # the batches read and handed to ``ahead``, in order
        read_upto: int | None = tracking  # None once the reader had nothing more
        size = max(1, self.batch_size // FIRST_BATCH_SHARE)
        scans = self.reader if keep is None and isinstance(self.reader, ScansAhead) else _NO_SCANS

        def fill() -> None:
            nonlocal read_upto, size
            while read_upto is not None and len(queued) <= READ_AHEAD:
                following = self.reader.read_batch(read_upto, size, keep)
                size = min(self.batch_size, size * 2)
                if not following.last_id:
                    read_upto = None
                    return
                self._ahead(read_upto, following.last_id, following.notifications, positions)
                queued.append(following)
                read_upto = following.last_id
            if read_upto is not None:
                scans.scan_ahead(read_upto, size)  # the next page, gathered while this one folds

        landing: BatchDone | None = None  # the batch committing while the next one folds
        try:
            fill()
            while queued:
                page = queued.popleft()
                commits, written = self._fold(tracking, page.last_id, page.notifications, positions)
                # Read before this batch's commit starts: a commit on another thread takes the GIL back
                # after every row it writes, and a read beside it waited for it at every row it fetched.
                fill()
                self.store.commit_aside(commits)  # the previous batch's commit has landed first
                self._report(landing)
                landing = BatchDone(tracking + 1, page.last_id, len(page.notifications), written)
                for name in names:
                    positions[name] = max(positions[name], page.last_id)
                stats.batches += 1
                stats.events += len(page.notifications)
                tracking = stats.tracking = page.last_id
        finally:
            scans.end_scans()
            self.store.settle()  # every batch folded is committed (or its error raised) before returning
        self._report(landing)
        for view in self.views:
            stats.failed.update(view.failed)
            if isinstance(view, Finishes):
                view.finish()
        return stats

    def _report(self, batch: BatchDone | None) -> None:
        """Report a batch once its commit has landed (``on_batch``: progress, committed positions)."""
        if batch is not None and self.on_batch is not None:
            self.on_batch(batch)

    def _ahead(self, after: int, upto: int, batch: list[Notification], positions: Mapping[str, int]) -> None:
        """Hand the views that read ahead the batch they fold next (``ReadsAhead``)."""
        if upto == 0:
            return
        for view, name in zip(self.views, self._names(), strict=True):
            at = positions[name]
            if isinstance(view, ReadsAhead) and at < upto:
                view.ahead(max(at, after), upto, _past(batch, at, after))

    def _fold(
        self, after: int, upto: int, batch: list[Notification], positions: Mapping[str, int]
    ) -> tuple[list[ProjectionCommit], int]:
        commits: list[ProjectionCommit] = []
        written = 0
        for view, name in zip(self.views, self._names(), strict=True):
            at = positions[name]
            if at >= upto:
                continue  # this view is already past the batch
            produced = view.fold(max(at, after), upto, _past(batch, at, after))
            own = produced.pop(view.name, {})
            written += len(own)
            commits.append(ProjectionCommit(view.name, name, upto, own))
            commits.extend(ProjectionCommit(rows_of, "", upto, rows) for rows_of, rows in produced.items())
        return commits, written


class _NoScans:
    """The ``ScansAhead`` of a reader that reads each page when asked (or of a shard): nothing ahead."""

    def scan_ahead(self, after: int, limit: int) -> None:
        """Start nothing."""

    def end_scans(self) -> None:
        """Wait for nothing."""


_NO_SCANS: ScansAhead = _NoScans()
