"""A session's summary stream: compaction requests, attempts, failures and artifacts, and their status."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol, TypedDict, Unpack

from contextledger.application.kernel.messages import SIDE_STREAM_SEPARATOR, check_stream_id
from contextledger.application.kernel.session_port import SessionLedger, check_keywords
from contextledger.domain.errors import ConcurrencyConflictError, InvalidMessageError, SummaryRejectedError
from contextledger.domain.events import (
    AnyEvent,
    CompactionRequested,
    ContextOverflowReported,
    Recorded,
    SummaryAttemptFailed,
    SummaryAttemptStarted,
    SummaryLeaseRenewed,
    SummaryRecorded,
)
from contextledger.domain.ports import EventLog
from contextledger.projections.summary_requests import check_summary_text

__all__ = [
    "SUMMARIES_KIND",
    "ArtifactSpec",
    "RequestStatus",
    "SummaryStream",
    "record_summary",
    "renews",
    "request_status",
    "summary_stream",
]

Status = Literal["open", "running", "waiting", "done", "dead"]


SUMMARIES_KIND = "summaries"
"""The suffix of a session's summary stream: ``<session>::summaries``."""


def summary_stream(session_id: str) -> str:
    """Return the id of the stream that holds a session's summary lifecycle and artifacts."""
    return f"{check_stream_id(session_id)}{SIDE_STREAM_SEPARATOR}{SUMMARIES_KIND}"


class _StatusFields(Protocol):
    @property
    def summary_id(self) -> str | None: ...
    @property
    def dead(self) -> bool: ...
    @property
    def lease_until(self) -> datetime | None: ...
    @property
    def retry_after(self) -> datetime | None: ...


def request_status(request: _StatusFields, now: datetime) -> Status:
    """The one rule for where a compaction request stands at ``now`` (folded status or view row)."""
    if request.summary_id is not None:
        return "done"
    if request.dead:
        return "dead"
    if request.lease_until is not None and request.lease_until > now:
        return "running"
    if request.retry_after is not None and request.retry_after > now:
        return "waiting"
    return "open"


@dataclass
class RequestStatus:
    """Where one compaction request stands, folded from its stream.

    ``open``: nobody is on it; ``running``: an attempt holds a lease; ``waiting``: it failed and
    may be retried after ``retry_after``; ``done``: its artifact is recorded; ``dead``: it failed
    too often (dead-lettered) and will not be tried again.
    """

    request: CompactionRequested
    attempts: int = 0
    lease_until: datetime | None = None
    lease_holder: str | None = None
    retry_after: datetime | None = None
    last_error: str | None = None
    summary_id: str | None = None
    dead: bool = False
    failures: list[SummaryAttemptFailed] = field(default_factory=list)

    def status(self, now: datetime) -> Status:
        """Return the request's status at ``now``."""
        return request_status(self, now)


class SummaryStream:
    """Reads and appends one session's summary stream; the store's ordering is the stream's ordering.

    Every append names the version it expects, so two workers cannot both start one attempt, and
    an artifact carries the idempotency key ``artifact:<request_id>``: however many workers finish
    the same request, one artifact is stored.
    """

    def __init__(self, log: EventLog, session_id: str) -> None:
        self.log = log
        self.session_id = session_id
        self.stream_id = summary_stream(session_id)

    def events(self) -> list[Recorded]:
        """Return the stream's events in order."""
        return self.log.read(self.stream_id)

    def artifacts(self) -> list[SummaryRecorded]:
        """Return the summary artifacts, oldest first."""
        return [r.event for r in self.events() if isinstance(r.event, SummaryRecorded)]

    def overflows(self) -> list[ContextOverflowReported]:
        """Return the context overflows the agent reported."""
        return [r.event for r in self.events() if isinstance(r.event, ContextOverflowReported)]

    def requests(self) -> dict[str, RequestStatus]:
        """Return every request with its folded status, in the order they were made."""
        return fold_requests(r.event for r in self.events())

    def append(
        self,
        event: AnyEvent,
        *,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        blobs: dict[str, str] | None = None,
    ) -> int:
        """Append one event after ``expected_version`` (default: the current head); return its position."""
        version = self.log.version(self.stream_id) if expected_version is None else expected_version
        outcome = self.log.append(
            self.stream_id, version, [event], blobs=blobs, idempotency_key=idempotency_key
        )
        return outcome.positions[0]

    def try_append(self, event: AnyEvent, *, expected_version: int) -> bool:
        """Append if the stream is still at ``expected_version``; return whether it was."""
        try:
            self.append(event, expected_version=expected_version)
        except ConcurrencyConflictError:
            return False
        return True


class _LeaseFields(Protocol):
    @property
    def attempts(self) -> int: ...
    @property
    def lease_until(self) -> datetime | None: ...
    @property
    def lease_holder(self) -> str | None: ...


def renews(request: _LeaseFields, renewal: SummaryLeaseRenewed) -> bool:
    """The one rule for a heartbeat: it extends the lease of the attempt still running, by its holder only."""
    return (
        request.lease_until is not None
        and renewal.attempt == request.attempts
        and renewal.worker == request.lease_holder
    )


def fold_requests(events: Iterable[AnyEvent]) -> dict[str, RequestStatus]:
    """Fold a summary stream's events into the status of each request."""
    found: dict[str, RequestStatus] = {}
    for event in events:
        if isinstance(event, CompactionRequested):
            found.setdefault(event.request_id, RequestStatus(request=event))
        elif isinstance(event, SummaryAttemptStarted) and event.request_id in found:
            status = found[event.request_id]
            status.attempts = max(status.attempts, event.attempt)
            status.lease_until = event.lease_until
            status.lease_holder = event.worker
        elif isinstance(event, SummaryLeaseRenewed) and event.request_id in found:
            status = found[event.request_id]
            if renews(status, event):
                status.lease_until = event.lease_until
        elif isinstance(event, SummaryAttemptFailed) and event.request_id in found:
            status = found[event.request_id]
            status.lease_until = None
            status.retry_after = event.retry_after
            status.last_error = f"{event.error_type}: {event.message}"
            status.dead = status.dead or event.dead_lettered
            status.failures.append(event)
        elif isinstance(event, SummaryRecorded) and event.request_id in found:
            found[event.request_id].summary_id = event.summary_id
    return found


class _ArtifactRequired(TypedDict):
    covers_from: int
    covers_through: int
    text: str


class ArtifactSpec(_ArtifactRequired, total=False):
    """The keywords of a summary artifact a caller records (``record_summary``).

    Required: ``covers_from``, ``covers_through``, ``text``; optional: ``produced_at``, ``model``,
    ``prompt_sha``, ``config_sha``.
    """

    produced_at: int | None
    model: str | None
    prompt_sha: str | None
    config_sha: str | None


def record_summary(
    ledger: SessionLedger, session_id: str, **artifact: Unpack[ArtifactSpec]
) -> SummaryRecorded:
    """Store a summary artifact of positions ``covers_from..covers_through`` in the summary stream.

    The artifact applies to renders at positions from ``produced_at`` on; the default is the next
    position (head + 1), so no render already made at an existing position can change. A past
    ``produced_at`` is for backfills: renders at positions from it on change.

    Raises:
        InvalidMessageError: the span is not one the session can have summarized, or ``text`` is empty
            or only a template's headings and placeholders (``check_summary_text``): nothing is written.
    """
    check_keywords("record_summary", artifact, ArtifactSpec)
    try:  # the worker's rule for a model's reply; a caller's artifact that breaks it is bad input
        check_summary_text(artifact["text"])
    except SummaryRejectedError as error:
        msg = f"a summary replaces what it covers, so it must say something: {error}"
        raise InvalidMessageError(msg) from error
    head = ledger.version(session_id)
    covers_from, covers_through = artifact["covers_from"], artifact["covers_through"]
    produced_at = artifact.get("produced_at")
    produced = head + 1 if produced_at is None else produced_at
    if not (1 <= covers_from <= covers_through <= produced <= head + 1 and covers_through <= head):
        msg = (
            f"a summary must cover events the session has: 1 <= from <= through <= {head} (its head), "
            f"through <= produced_at <= {head + 1}; got {covers_from}..{covers_through} "
            f"produced at {produced}"
        )
        raise InvalidMessageError(msg)
    blobs: dict[str, str] = {}
    event = SummaryRecorded(
        summary_id=ledger.ids.new_id(),
        session_id=session_id,
        covers_from=covers_from,
        covers_through=covers_through,
        content=ledger.stored_text(artifact["text"], blobs),
        produced_at=produced,
        model=artifact.get("model"),
        prompt_sha=artifact.get("prompt_sha"),
        config_sha=artifact.get("config_sha"),
        producer="api",
        at=ledger.clock.now(),
    )
    SummaryStream(ledger.log, session_id).append(event, blobs=blobs)
    return event
