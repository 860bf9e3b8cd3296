"""The checkpointed summaries view: per session, its summary artifacts and each request's status."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

import msgspec
from contextledger.application.kernel.logs import get_logger
from contextledger.application.kernel.summary_log import SUMMARIES_KIND, Status, renews, request_status
from contextledger.application.views.side_stream_view import SideStreamView
from contextledger.application.views.view_runner import Rows
from contextledger.domain.content import text_chars, text_preview
from contextledger.domain.errors import StoreError
from contextledger.domain.events import (
    CompactionRequested,
    ContextOverflowReported,
    Recorded,
    SummaryAttemptFailed,
    SummaryAttemptStarted,
    SummaryLeaseRenewed,
    SummaryRecorded,
)
from contextledger.domain.ports import Notification, ProjectionRows

__all__ = [
    "PREVIEW_CHARS",
    "SUMMARIES_VIEW",
    "ArtifactRow",
    "OverflowRow",
    "RequestRow",
    "SummariesView",
    "SummaryRow",
    "decode_summary_row",
    "fold_summary_row",
    "read_summaries",
]

log = get_logger(__name__)

SUMMARIES_VIEW = "summaries/v1"
"""The name of the view's rows (one per session, keyed by session id); raise the version on a change."""

PREVIEW_CHARS = 160
"""Leading characters of an artifact's text kept in its row (the full text stays in the log)."""


class ArtifactRow(msgspec.Struct, frozen=True, array_like=True):
    """One summary artifact: what it covers, from when it applies, who made it, and its text's size."""

    summary_id: str
    covers_from: int
    covers_through: int
    produced_at: int
    request_id: str | None
    round: int
    depth: int
    previous_summary_id: str | None
    producer: str | None
    summarizer: str | None
    model: str | None
    tokens: int | None
    chars: int
    preview: str
    fidelity: float | None
    recorded_at: datetime | None
    stream_position: int
    """Its position in the summary stream."""


class RequestRow(msgspec.Struct, frozen=True, array_like=True):
    """One compaction request and where it stands (the fields of ``RequestStatus``, failures counted)."""

    request_id: str
    covers_from: int
    covers_through: int
    planned_at: int
    trigger: str
    round: int
    requested_at: datetime | None
    stream_position: int
    attempts: int = 0
    lease_until: datetime | None = None
    lease_holder: str | None = None
    retry_after: datetime | None = None
    last_error: str | None = None
    summary_id: str | None = None
    dead: bool = False
    failures: int = 0

    def status(self, now: datetime) -> Status:
        """Return the request's status at ``now`` (by the rule ``RequestStatus.status`` follows)."""
        return request_status(self, now)


class OverflowRow(msgspec.Struct, frozen=True, array_like=True):
    """A context overflow the agent reported: at which session position, how far over."""

    position: int
    limit_tokens: int | None
    sent_tokens: int | None
    reported_at: datetime | None
    stream_position: int


class SummaryRow(msgspec.Struct, frozen=True, array_like=True):
    """A session's summary stream folded up to ``position``: artifacts, requests, overflows (stream order)."""

    position: int
    artifacts: tuple[ArtifactRow, ...] = ()
    requests: tuple[RequestRow, ...] = ()
    overflows: tuple[OverflowRow, ...] = ()

    def request(self, request_id: str) -> RequestRow | None:
        """Return one request's row, or None."""
        return next((r for r in self.requests if r.request_id == request_id), None)


_ENCODE = msgspec.msgpack.Encoder().encode
_DECODER = msgspec.msgpack.Decoder(SummaryRow)


def _artifact(stream_position: int, event: SummaryRecorded) -> ArtifactRow:
    return ArtifactRow(
        summary_id=event.summary_id,
        covers_from=event.covers_from,
        covers_through=event.covers_through,
        produced_at=event.produced_at,
        request_id=event.request_id,
        round=event.round,
        depth=event.depth,
        previous_summary_id=event.previous_summary_id,
        producer=event.producer,
        summarizer=event.summarizer,
        model=event.model,
        tokens=event.tokens,
        chars=text_chars(event.content),
        preview=text_preview(event.content, PREVIEW_CHARS),
        fidelity=event.fidelity.overall if event.fidelity is not None else None,
        recorded_at=event.at,
        stream_position=stream_position,
    )


def _request(stream_position: int, event: CompactionRequested) -> RequestRow:
    return RequestRow(
        request_id=event.request_id,
        covers_from=event.covers_from,
        covers_through=event.covers_through,
        planned_at=event.planned_at,
        trigger=event.trigger,
        round=event.round,
        requested_at=event.at,
        stream_position=stream_position,
    )


def _failed(status: RequestRow, event: SummaryAttemptFailed) -> RequestRow:
    return msgspec.structs.replace(
        status,
        lease_until=None,
        retry_after=event.retry_after,
        last_error=f"{event.error_type}: {event.message}",
        dead=status.dead or event.dead_lettered,
        failures=status.failures + 1,
    )


def _attempt_folded(
    status: RequestRow, event: SummaryAttemptStarted | SummaryLeaseRenewed | SummaryAttemptFailed
) -> RequestRow:
    """A request row after one of its attempt's events (started, lease renewed, failed)."""
    if isinstance(event, SummaryAttemptStarted):
        return msgspec.structs.replace(
            status,
            attempts=max(status.attempts, event.attempt),
            lease_until=event.lease_until,
            lease_holder=event.worker,
        )
    if isinstance(event, SummaryLeaseRenewed):
        return (
            msgspec.structs.replace(status, lease_until=event.lease_until)
            if renews(status, event)
            else status
        )
    return _failed(status, event)


def fold_summary_row(row: SummaryRow | None, events: Iterable[Recorded]) -> SummaryRow:
    """Fold a session's summary-stream events (in order) into its row; ``row`` is left as it was.

    Events at or before ``row.position`` are skipped (already folded). Requests fold as
    ``fold_requests`` folds them: an attempt, failure or artifact of an unknown request changes no
    request; an artifact is listed whatever its request. Raise ``StoreError`` when the events skip
    a position after the row's (a row can only be continued by the events right after it).
    """
    position = row.position if row is not None else 0
    artifacts = list(row.artifacts) if row is not None else []
    requests = {r.request_id: r for r in row.requests} if row is not None else {}
    overflows = list(row.overflows) if row is not None else []
    for recorded in events:
        at, event = recorded.position, recorded.event
        if at <= position:
            continue
        if at != position + 1:
            raise StoreError(f"the summary events jump from position {position} to {at}")
        position = at
        if isinstance(event, CompactionRequested):
            requests.setdefault(event.request_id, _request(at, event))
        elif isinstance(event, SummaryAttemptStarted | SummaryLeaseRenewed | SummaryAttemptFailed):
            if event.request_id in requests:
                requests[event.request_id] = _attempt_folded(requests[event.request_id], event)
        elif isinstance(event, SummaryRecorded):
            artifacts.append(_artifact(at, event))
            if event.request_id is not None and event.request_id in requests:
                status = requests[event.request_id]
                requests[event.request_id] = msgspec.structs.replace(status, summary_id=event.summary_id)
        elif isinstance(event, ContextOverflowReported):
            overflows.append(OverflowRow(event.position, event.limit_tokens, event.sent_tokens, event.at, at))
    return SummaryRow(
        position=position,
        artifacts=tuple(artifacts),
        requests=tuple(sorted(requests.values(), key=lambda r: r.stream_position)),
        overflows=tuple(overflows),
    )


def decode_summary_row(data: bytes) -> SummaryRow:
    """Decode a stored row; ``StoreError`` when it does not decode."""
    try:
        return _DECODER.decode(data)
    except msgspec.DecodeError as error:
        raise StoreError(f"a row of {SUMMARIES_VIEW} does not decode: {error}") from error


def read_summaries(
    store: ProjectionRows, session_id: str, *, name: str = SUMMARIES_VIEW
) -> SummaryRow | None:
    """Return the session's folded summary row, or None when its summary stream has no events (yet)."""
    found = store.load_row(name, session_id)
    return decode_summary_row(found[1]) if found is not None else None


class SummariesView(SideStreamView):
    """Keeps one row per session folded from its ``<session>::summaries`` stream.

    Each batch reads back, in one call, the existing rows of the sessions it touches (none when the
    view started empty, or resumed where this instance left it, and did not write the session since)
    and folds the new events onto them.

    Args:
        store: Where the rows are (read back to continue them).
        name: The name of the rows and checkpoint (another name builds a second copy beside it).
    """

    kind = SUMMARIES_KIND

    def __init__(self, store: ProjectionRows, *, name: str = SUMMARIES_VIEW) -> None:
        """Keep the store; nothing is read until the first batch."""
        super().__init__(store, name=name)

    def row_keys(self, session_id: str, notes: list[Notification]) -> list[str]:
        """One row per session."""
        del notes
        return [session_id]

    def fold_session(self, session_id: str, notes: list[Notification], stored: Rows) -> Rows:
        """Fold a session's summary events onto its stored row."""
        found = stored.get(session_id)
        events = [Recorded(note.position, note.event) for note in notes]
        row = fold_summary_row(decode_summary_row(found[1]) if found else None, events)
        return {session_id: (row.position, _ENCODE(row))}
