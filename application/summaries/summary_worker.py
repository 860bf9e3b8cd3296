"""The summary worker: takes compaction requests, calls the summarizer off the render path, stores results."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

import msgspec
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.kernel.logs import get_logger
from contextledger.application.kernel.summary_log import SUMMARIES_KIND, RequestStatus, SummaryStream
from contextledger.application.render.renderer import Renderer
from contextledger.application.summaries.card_check import (
    card_state_at,
    model_written,
    summarize_against_card,
)
from contextledger.application.summaries.compaction import policy_key
from contextledger.application.summaries.request_builder import RequestBuilder
from contextledger.application.summaries.summary_limits import request_policy, summary_limit
from contextledger.application.views.view_runner import split_stream
from contextledger.domain.content import content_address
from contextledger.domain.errors import (
    ConcurrencyConflictError,
    ContextLedgerError,
    SummarizerError,
    SummaryInputTooLargeError,
    SummaryRejectedError,
)
from contextledger.domain.events import (
    CompactionRequested,
    SummaryAttemptFailed,
    SummaryAttemptStarted,
    SummaryLeaseRenewed,
    SummaryRecorded,
)
from contextledger.projections.card_fidelity import check_against_card, with_card_check
from contextledger.projections.fidelity import check_keeps_facts, facts_of, fidelity
from contextledger.projections.policy import Policy
from contextledger.projections.presets import PRESETS
from contextledger.projections.summary_requests import Summarizer, SummaryRequest, check_summary_text

__all__ = ["CompactionCallbacks", "SummaryWorker", "WorkerSettings", "run_async", "run_in_thread"]

log = get_logger(__name__)


class CompactionCallbacks(Protocol):
    """Seed 002's hooks around a compaction: called by the worker, never on the render path."""

    def before_compaction(self, request: CompactionRequested) -> None:
        """Called when an attempt starts."""
        ...

    def after_compaction(
        self, request: CompactionRequested, outcome: SummaryRecorded | SummaryAttemptFailed
    ) -> None:
        """Called with the artifact recorded, or the failure recorded."""
        ...


@dataclass(frozen=True)
class WorkerSettings:
    """How a worker retries: lease and heartbeat, attempts before dead-lettering, backoff, entry size."""

    lease: timedelta = timedelta(minutes=1)
    """An attempt's lease; the worker's heartbeat renews it while the summarizer call lasts."""
    heartbeat: timedelta = timedelta(seconds=15)
    """How often a working worker renews its lease (``SummaryLeaseRenewed``): a holder that died, on any
    host, frees its request within ``lease`` of its last heartbeat."""
    max_attempts: int = 5
    backoff: timedelta = timedelta(seconds=10)
    """The first retry waits this long, each later one twice as long."""
    entry_chars: int = 4_000
    """How much of one event's text a summary request carries (head and tail of longer ones)."""
    max_summary_tokens: int = 800
    """The size bound of one summary when the policy sets none; larger answers are rejected."""


_FINAL = frozenset({"done", "dead"})
"""Statuses a request never leaves (``request_status``)."""


def _within_bound(tokens: int, limit: int) -> int:
    """Return ``tokens`` when a summary of that size may be applied; reject it otherwise."""
    if tokens > limit:
        raise SummaryRejectedError(f"the summary has {tokens:,} tokens, over its bound of {limit:,}")
    return tokens


class SummaryWorker:
    """Consumes compaction requests of every session and records one artifact per request.

    Resumable: requests, attempts (with leases) and outcomes are events in each session's summary
    stream, so a restarted worker sees what was in flight; a lease held by this worker's id from an
    earlier process, by a holder ``holder_alive`` says is dead (same host: its pid is gone), or no
    longer renewed by its holder's heartbeat (any host), is taken over. Several workers may run: starting an
    attempt appends at the version the worker read (one wins), and the artifact's idempotency key
    stores one artifact per request however many finish. A failure records ``SummaryAttemptFailed``
    (retry after a backoff, dead-lettered after ``max_attempts``) and changes nothing in any
    projection.

    Args:
        ledger: The ledger.
        renderer: Renders the live prefix a model summarizer sends first (cache reads).
        summarizer: The summarizer port.
        worker_id: This worker's name in attempts and leases.
        holder_alive: Says whether another lease holder may still run (by its name); none: every
            holder is trusted until its lease, renewed by its heartbeat, runs out.
        policies: Policies by ``policy_key``/name for rendering prefixes (presets by default).
        callbacks: Hooks before and after each compaction.
    """

    def __init__(
        self,
        ledger: Ledger,
        renderer: Renderer,
        summarizer: Summarizer,
        *,
        worker_id: str = "worker",
        settings: WorkerSettings | None = None,
        policies: Mapping[str, Policy] | None = None,
        callbacks: Sequence[CompactionCallbacks] = (),
        holder_alive: Callable[[str], bool] | None = None,
    ) -> None:
        self.ledger = ledger
        self.holder_alive = holder_alive
        self.renderer = renderer
        self.summarizer = summarizer
        self.worker_id = worker_id
        self.settings = settings or WorkerSettings()
        known = dict(policies or PRESETS)
        self.policies = {**known, **{policy_key(p): p for p in known.values()}}
        self.callbacks = tuple(callbacks)
        self.failed: list[SummaryAttemptFailed] = []
        """The attempts of the last ``run_once`` that failed (a summarizer down, a draft refused)."""
        self._in_flight: set[str] = set()
        self._lock = threading.Lock()
        self._scanned = 0
        """The notification id up to which the store was scanned for summary streams."""
        self._with_streams: dict[str, None] = {}
        """Sessions that have a summary stream, in the order their streams began."""
        self._settled: set[str] = set()
        """Sessions whose every request was done or dead when a pass last read them, and whose summary
        stream has had no event since (its notification unsettles it): a pass does not read them again."""

    # -- what is there to do ------------------------------------------------------------------

    def requests(self) -> list[tuple[str, RequestStatus]]:
        """Return every session's compaction requests with their status."""
        found: list[tuple[str, RequestStatus]] = []
        for session_id in self._sessions_with_streams():
            found.extend(
                (session_id, s) for s in SummaryStream(self.ledger.log, session_id).requests().values()
            )
        return found

    def _sessions_with_streams(self) -> list[str]:
        """Sessions with a summary stream, from new notifications' stream names (not a read per session)."""
        reader = self.ledger.ports.notifications
        if reader is None:
            return [info.session_id for info in self.ledger.sessions()]

        def note(stream_id: str) -> bool:
            session_id, kind = split_stream(stream_id)
            if kind == SUMMARIES_KIND:
                self._with_streams[session_id] = None
                self._settled.discard(session_id)
            return False  # nothing to decode

        while (page := reader.read_batch(self._scanned, 10_000, note)).last_id:
            self._scanned = page.last_id
        return list(self._with_streams)

    def _takeable(self, status: RequestStatus) -> bool:
        state = status.status(self.ledger.clock.now())
        if state == "open":
            return True
        if state != "running" or status.request.request_id in self._in_flight:
            return False
        holder = status.lease_holder
        if holder == self.worker_id:
            return True  # this worker's earlier process died mid-call
        return holder is not None and self.holder_alive is not None and not self.holder_alive(holder)

    def _unsettled(self) -> list[tuple[str, RequestStatus]]:
        """The requests of the sessions not settled: a pass reads the streams with work left, not every one.

        A session is settled once all its requests are done or dead, until its summary stream gets an
        event (a new request, another worker's attempt). Only a ledger with a notification log tells that;
        without one, every stream is read on every pass.
        """
        sessions = self._sessions_with_streams()
        tracked = self.ledger.ports.notifications is not None
        now = self.ledger.clock.now()
        found: list[tuple[str, RequestStatus]] = []
        for session_id in sessions:
            if session_id in self._settled:
                continue
            statuses = SummaryStream(self.ledger.log, session_id).requests().values()
            if tracked and all(s.status(now) in _FINAL for s in statuses):
                self._settled.add(session_id)
            found.extend((session_id, s) for s in statuses)
        return found

    def run_once(self, limit: int | None = None) -> int:
        """Process the requests that can be taken now (at most ``limit``); return how many it tried itself.

        ``failed`` then holds the failures among them (``SummaryAttemptFailed``), in order.
        """
        done = 0
        self.failed = []
        for session_id, status in self._unsettled():
            if limit is not None and done >= limit:
                break
            outcome = self.process(session_id, status) if self._takeable(status) else None
            if outcome is not None:
                done += 1  # a request another worker took first is not counted
            if isinstance(outcome, SummaryAttemptFailed):
                self.failed.append(outcome)
        return done

    # -- one request --------------------------------------------------------------------------

    def process(
        self, session_id: str, status: RequestStatus
    ) -> SummaryRecorded | SummaryAttemptFailed | None:
        """Attempt one request; return the artifact or failure recorded, or None if another worker took it."""
        request = status.request
        stream = SummaryStream(self.ledger.log, session_id)
        attempt = status.attempts + 1
        now = self.ledger.clock.now()
        started = SummaryAttemptStarted(
            request_id=request.request_id,
            attempt=attempt,
            worker=self.worker_id,
            lease_until=now + self.settings.lease,
            at=now,
        )
        version = self.ledger.log.version(stream.stream_id)
        current = stream.requests().get(request.request_id)
        if (
            current is None
            or not self._takeable(current)
            or not stream.try_append(started, expected_version=version)
        ):
            return None
        with self._lock:
            self._in_flight.add(request.request_id)
        try:
            for callback in self.callbacks:
                callback.before_compaction(request)
            outcome = self._attempt(session_id, stream, request, attempt)
            for callback in self.callbacks:
                callback.after_compaction(request, outcome)
            return outcome
        finally:
            with self._lock:
                self._in_flight.discard(request.request_id)

    def _attempt(
        self, session_id: str, stream: SummaryStream, request: CompactionRequested, attempt: int
    ) -> SummaryRecorded | SummaryAttemptFailed:
        artifacts = {a.summary_id: a for a in stream.artifacts()}
        previous = artifacts.get(request.previous_summary_id or "")
        policy = request_policy(request, self.policies)
        limit = summary_limit(request, policy, self.renderer.counter.count, self.settings.max_summary_tokens)
        try:
            with self._heartbeat(stream, request.request_id, attempt):
                card = card_state_at(self.ledger, session_id, request.planned_at)
                builder = RequestBuilder(
                    self.ledger, self.renderer, self.summarizer.config_sha, self.settings.entry_chars
                )
                summary_request = builder.build(session_id, request, previous, policy, limit, card=card)
                calls = [summary_request]
                if policy is not None and model_written(self.summarizer):  # each call held to the window
                    owed = check_against_card(card, request.covers_from, request.covers_through, "").lost
                    calls = builder.parts(summary_request, builder.window(policy, request, limit), owed=owed)
                outcome = summarize_against_card(self.summarizer, self._chained(calls, limit), card)
            draft, text = outcome.draft, outcome.text
            tokens = _within_bound(self.renderer.counter.count(text), limit)
            kept = fidelity(facts_of(summary_request.entries), text)
            if model_written(self.summarizer):
                check_keeps_facts(kept)
        except SummaryInputTooLargeError as error:  # the same span gives the same request: not retried
            return self._failed(stream, request, attempt, type(error).__name__, str(error), final=True)
        except (SummarizerError, ContextLedgerError) as error:
            return self._failed(stream, request, attempt, type(error).__name__, str(error))
        except Exception as error:
            log.exception("summarizer_crashed", request_id=request.request_id)
            return self._failed(stream, request, attempt, type(error).__name__, str(error))
        blobs: dict[str, str] = {}
        content = self.ledger.stored_text(text, blobs)
        span_tokens = sum(self.renderer.counter.count(e.text) for e in summary_request.entries)
        artifact = SummaryRecorded(
            summary_id="sum-" + content_address(request.request_id)[:24],
            session_id=session_id,
            covers_from=request.covers_from,
            covers_through=request.covers_through,
            content=content,
            produced_at=self.ledger.version(session_id) + 1,  # applies from the next event on
            model=draft.model,
            prompt_sha=draft.prompt_sha,
            config_sha=self.summarizer.config_sha,
            request_id=request.request_id,
            round=request.round,
            depth=request.depth,
            previous_summary_id=request.previous_summary_id,
            summarizer=self.summarizer.name,
            producer="worker",
            tokens=tokens,
            tokens_before=request.tokens_before,
            tokens_after=_after(request.tokens_before, span_tokens, tokens),
            fidelity=with_card_check(kept, outcome.check),
            drafts=outcome.drafts + len(calls) - 1,  # the calls of a chain before its last draft
            withheld=outcome.withheld,
            at=self.ledger.clock.now(),
        )
        stream.append(artifact, idempotency_key=f"artifact:{request.request_id}", blobs=blobs)
        log.info("summary_recorded", request_id=request.request_id, tokens=tokens, session_id=session_id)
        return artifact

    @contextmanager
    def _heartbeat(self, stream: SummaryStream, request_id: str, attempt: int) -> Iterator[None]:
        """Renew the attempt's lease every ``heartbeat`` while the body runs; stopped before the outcome."""
        stop = threading.Event()
        interval = self.settings.heartbeat.total_seconds()

        def beat() -> None:
            while not stop.wait(interval):
                renewal = SummaryLeaseRenewed(
                    request_id=request_id,
                    attempt=attempt,
                    worker=self.worker_id,
                    lease_until=self.ledger.clock.now() + self.settings.lease,
                    at=self.ledger.clock.now(),
                )
                try:
                    stream.append(renewal)
                except (ConcurrencyConflictError, ContextLedgerError) as error:  # next beat tries again
                    log.info("lease_renewal_failed", request_id=request_id, error=type(error).__name__)

        thread = threading.Thread(target=beat, name=f"heartbeat-{request_id}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()

    def _chained(self, calls: list[SummaryRequest], limit: int) -> SummaryRequest:
        """Summarize every call but the last, each the previous one's summary; return the last, to be checked.

        One call unless the request was split to fit the model's window (``RequestBuilder.parts``): then
        each run of the span is summarized with what the runs before it came to (each answer held to the
        summary's bound, as the room of the next call assumed), and the last call's answer, checked
        against the card like any other, covers the whole span.
        """
        previous = calls[0].previous
        for call in calls[:-1]:
            text = check_summary_text(
                self.summarizer.summarize(msgspec.structs.replace(call, previous=previous)).text
            )
            _within_bound(self.renderer.counter.count(text), limit)
            previous = text
        last = calls[-1]
        return last if len(calls) == 1 else msgspec.structs.replace(last, previous=previous)

    def _failed(
        self,
        stream: SummaryStream,
        request: CompactionRequested,
        attempt: int,
        kind: str,
        message: str,
        *,
        final: bool = False,
    ) -> SummaryAttemptFailed:
        dead = final or attempt >= self.settings.max_attempts
        now = self.ledger.clock.now()
        failure = SummaryAttemptFailed(
            request_id=request.request_id,
            attempt=attempt,
            worker=self.worker_id,
            error_type=kind,
            message=message[:500],
            retry_after=None if dead else now + self.settings.backoff * 2 ** (attempt - 1),
            dead_lettered=dead,
            at=now,
        )
        stream.append(failure)
        log.warning("summary_failed", request_id=request.request_id, attempt=attempt, dead=dead, error=kind)
        return failure


def run_in_thread(worker: SummaryWorker, *, poll: float = 1.0) -> tuple[threading.Thread, Callable[[], None]]:
    """Run ``worker`` in a daemon thread until the returned ``stop`` is called; return (thread, stop)."""
    stopping = threading.Event()

    def loop() -> None:
        while not stopping.is_set():
            try:
                busy = worker.run_once()
            except ContextLedgerError as error:  # the store may be briefly unavailable: try again later
                log.warning("worker_pass_failed", error=str(error))
                busy = 0
            if not busy:
                stopping.wait(poll)

    thread = threading.Thread(target=loop, name=f"contextledger-{worker.worker_id}", daemon=True)
    thread.start()
    return thread, stopping.set


async def run_async(worker: SummaryWorker, stop: asyncio.Event, *, poll: float = 1.0) -> None:
    """Run ``worker`` as an asyncio task until ``stop`` is set; summarizer calls run in a thread."""
    while not stop.is_set():
        try:
            busy = await asyncio.to_thread(worker.run_once)
        except ContextLedgerError as error:
            log.warning("worker_pass_failed", error=str(error))
            busy = 0
        if not busy:
            try:
                await asyncio.wait_for(stop.wait(), timeout=poll)
            except TimeoutError:
                continue


def _after(before: int, span: int, summary: int) -> int | None:
    """The context's size once the summary replaces its span: an estimate, None when it cannot be one.

    ``span`` counts the span's messages whole, ``before`` the context as rendered (stubs, cuts): when the
    span outweighs the context, the estimate fell below the summary itself (it read 0, shown "5,720 → 0
    (summary 256)"), which no context holding the summary can be.
    """
    after = before - span + summary
    return after if after >= summary else None
