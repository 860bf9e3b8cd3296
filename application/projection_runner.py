"""Checkpointed context projections: folds every session's render state from the store's notifications."""

from __future__ import annotations

import gc
import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import msgspec
import structlog
from contextledger.application.ledger import Ledger
from contextledger.application.renderer import Renderer
from contextledger.domain.errors import ContextLedgerError
from contextledger.domain.events import Recorded, SummaryRecorded
from contextledger.domain.ports import Notification, NotificationReader, ProjectionStore, TokenCounter
from contextledger.projections.counting import CountedEvent
from contextledger.projections.fold import Projector
from contextledger.projections.policy import Policy

__all__ = ["BATCH_SIZE", "CONTEXT_VIEW", "BatchDone", "ProjectionRunner", "RunStats", "projection_version"]

log = structlog.get_logger(__name__)

BATCH_SIZE = 1_000
"""Notifications folded and committed per transaction (one per event measured ~20x slower)."""

CONTEXT_VIEW = "context"
"""The registry name whose active version serves rendered context."""

_SUMMARIES = "summaries"


@contextmanager
def _collector_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def projection_version(projector: Projector) -> str:
    """The versioned name of a context projection: ``context/<policy hash>/<budget>/<tokenizer>``."""
    policy = hashlib.sha256(projector.policy.fingerprint().encode()).hexdigest()[:16]
    return f"{CONTEXT_VIEW}/{policy}/{projector.budget.total}/{projector.tokenizer}"


class BatchDone(msgspec.Struct, frozen=True):
    """One committed batch: the notification ids it covered, its events and the sessions it wrote."""

    first_id: int
    tracking: int
    events: int
    sessions: int


class RunStats(msgspec.Struct):
    """What a catch-up did: batches committed, events folded, tracking before and after, failed sessions."""

    started_at: int = 0
    tracking: int = 0
    batches: int = 0
    events: int = 0
    failed: dict[str, str] = msgspec.field(default_factory=dict)


class ProjectionRunner:
    """Keeps one context projection version (policy, budget, tokenizer) up to date, checkpointed.

    Each batch of notifications (every stream, store order) is folded per touched session with the
    Renderer's own fold (summary artifacts from ``<session>::summaries`` streams included), then the
    touched sessions' rows and the tracking position are committed in ONE transaction: after a crash
    the runner resumes after the last committed batch. One runner per projection (a lease).

    Args:
        ledger: The ledger whose sessions are folded.
        reader: Notifications of every stream in store order.
        views: Where rows, tracking and the lease live.
        policy: A preset name or ``Policy``.
        budget: Prompt budget override.
        tokenizer: Tokenizer name or counter.
        batch_size: Notifications per transaction.
        projection: The version name (default: ``projection_version`` of the projector).
        on_batch: Called after each committed batch (progress bars).
        max_states: Folded states kept in memory (others are reloaded from their rows).
    """

    def __init__(
        self,
        ledger: Ledger,
        reader: NotificationReader,
        views: ProjectionStore,
        *,
        policy: Policy | str = "default",
        budget: int | None = None,
        tokenizer: str | TokenCounter = "cl100k_base",
        batch_size: int = BATCH_SIZE,
        projection: str | None = None,
        on_batch: Callable[[BatchDone], None] | None = None,
        max_states: int = 4_096,
    ) -> None:
        """Wire the runner; nothing is read until ``run``."""
        self.renderer = Renderer(ledger, tokenizer=tokenizer, max_states=max_states, snapshots=False)
        self.projector = self.renderer.projector(policy, budget=budget)
        self.projection = projection or projection_version(self.projector)
        self.reader = reader
        self.views = views
        self.batch_size = batch_size
        self.on_batch = on_batch
        self._warm: OrderedDict[str, int] = OrderedDict()
        self._written: set[str] = set()
        self._artifacts: dict[str, list[SummaryRecorded]] = {}
        """Summary artifacts read from the notifications and not yet folded, by session."""
        self._empty_at_start = False
        self._max_states = max_states

    def run(self) -> RunStats:
        """Take the lease, fold every notification after the tracking position, release the lease."""
        lease = self.views.acquire(self.projection)
        try:
            return self.catch_up()
        finally:
            lease.release()

    def follow(
        self,
        *,
        stop: Callable[[], bool],
        poll: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> RunStats:
        """Catch up, then keep tailing new notifications every ``poll`` seconds until ``stop()``."""
        total = RunStats()
        lease = self.views.acquire(self.projection)
        try:
            while True:
                stats = self.catch_up()
                total.batches += stats.batches
                total.events += stats.events
                total.tracking = stats.tracking
                total.failed.update(stats.failed)
                if stop():
                    return total
                sleep(poll)
                self.views.acquire(self.projection)  # renews the lease while idle
        finally:
            lease.release()

    def catch_up(self) -> RunStats:
        """Fold and commit batches until the reader has nothing after the tracking position.

        The cyclic garbage collector is paused meanwhile: decoding allocates millions of objects
        while thousands of folded states stay alive, so its full passes (which walk every live
        state again and again) measured ~30% of a rebuild; folding creates no cycles.
        """
        with _collector_paused():
            return self._catch_up()

    def _catch_up(self) -> RunStats:
        tracking = self.views.load_tracking(self.projection)
        if not self._warm and not self._written:
            self._empty_at_start = tracking == 0  # no rows yet: nothing to read back until written
        stats = RunStats(started_at=tracking, tracking=tracking)
        while True:
            batch = self.reader.read_notifications(tracking, self.batch_size)
            if not batch:
                return stats
            rows = self._fold(batch, stats)
            self.views.commit(self.projection, batch[-1].id, rows)
            tracking = stats.tracking = batch[-1].id
            stats.batches += 1
            stats.events += len(batch)
            if self.on_batch is not None:
                self.on_batch(BatchDone(batch[0].id, tracking, len(batch), len(rows)))
            if len(batch) < self.batch_size:
                return stats

    def _fold(self, batch: list[Notification], stats: RunStats) -> dict[str, tuple[int, bytes]]:
        """Fold the sessions a batch touches; return their rows (position, state bytes)."""
        touched: dict[str, int] = {}
        owners: list[str] = []
        records: list[Recorded] = []
        for note in batch:
            stream, _, kind = note.stream_id.partition("::")
            if not kind:
                touched[stream] = note.position
                owners.append(stream)
                records.append(Recorded(note.position, note.event))
            elif kind == _SUMMARIES:
                touched.setdefault(stream, 0)
                if isinstance(note.event, SummaryRecorded):
                    self._artifacts.setdefault(stream, []).append(note.event)
        read: dict[str, list[CountedEvent]] = {}
        # One count of the whole batch: one token-cache lookup, not one per session.
        for owner, counted in zip(owners, self.renderer.reader.count(self.projector, records), strict=True):
            read.setdefault(owner, []).append(counted)
        stored = self.views.load_rows(self.projection, [s for s in touched if self._may_have_row(s)])
        rows: dict[str, tuple[int, bytes]] = {}
        for session_id, seen in touched.items():
            row = stored.get(session_id)
            at = max(seen, self._warm.get(session_id, 0), row[0] if row else 0)
            if at == 0:
                continue  # an artifact of a session with no events yet
            known = session_id in self._warm or row is not None or self._empty_at_start
            try:
                events = read.get(session_id, [])
                contiguous = (
                    bool(events)
                    and events[-1].seq == at
                    and events[-1].seq - events[0].seq == len(events) - 1
                )
                data = self.renderer.fold_row(
                    session_id,
                    self.projector,
                    at,
                    row[1] if row else None,
                    events=events if contiguous else (),
                    # Artifacts recorded before this run are folded into a known state already.
                    summaries=self._artifacts.get(session_id, []) if known else None,
                )
            except ContextLedgerError as error:
                stats.failed[session_id] = str(error)
                log.warning("projection_session_failed", projection=self.projection, session_id=session_id)
                continue
            self._artifacts.pop(session_id, None)
            rows[session_id] = (at, data)
            self._written.add(session_id)
            self._warm[session_id] = at
            self._warm.move_to_end(session_id)
            while len(self._warm) > self._max_states:
                self._warm.popitem(last=False)
        return rows

    def _may_have_row(self, session_id: str) -> bool:
        """Whether a row must be read: not in memory, nor known absent (empty at start, not written since)."""
        if session_id in self._warm:
            return False
        return not self._empty_at_start or session_id in self._written
