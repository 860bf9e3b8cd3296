"""The checkpointed calls view: each ``model_calls`` record as a compact row, with its reported usage."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import msgspec
from contextledger.application.audit.call_recorder import CALLS_KIND
from contextledger.application.kernel.logs import get_logger
from contextledger.application.views.side_stream_view import SideStreamView
from contextledger.application.views.view_runner import Rows
from contextledger.domain.errors import StoreError
from contextledger.domain.events import DispositionRun, ModelCallRecorded, ModelCallUsageReported
from contextledger.domain.ports import Notification, ProjectionRows

__all__ = [
    "CALLS_VIEW",
    "CallRow",
    "CallsView",
    "Fates",
    "UsageRow",
    "call_key",
    "call_row",
    "fates_of",
    "list_calls",
    "usage_row",
]

log = get_logger(__name__)

CALLS_VIEW = "model_calls/v1"
"""The name of the view's rows (one per call, keyed ``<session>/<call id>``); versioned."""


class Fates(msgspec.Struct, frozen=True, array_like=True):
    """How many log positions of a call met each fate (from its disposition runs)."""

    verbatim: int = 0
    pinned: int = 0
    truncated: int = 0
    stubbed: int = 0
    summarized: int = 0
    dropped: int = 0
    control: int = 0


class UsageRow(msgspec.Struct, frozen=True, array_like=True):
    """What the provider reported for a call, and where the report is in the calls stream."""

    input_tokens: int | None
    cached_tokens: int | None
    cache_write_tokens: int | None
    output_tokens: int | None
    latency_ms: float | None
    model: str | None
    reported_at: datetime | None
    stream_position: int


class CallRow(msgspec.Struct, frozen=True, array_like=True):
    """One recorded model call: what a user lists calls by, without the dispositions themselves.

    ``stream_position`` is the record's position in the session's calls stream (calls list in that order),
    ``position`` the session position the call rendered at, ``tokens`` the rendered input tokens.
    """

    call_id: str
    session_id: str
    stream_position: int
    position: int
    policy: str
    policy_hash: str
    budget: int
    tokenizer: str
    tokens: int
    fates: Fates
    summary_id: str | None
    wire_format: str
    recorded_at: datetime | None
    usage: UsageRow | None = None


_ENCODE = msgspec.msgpack.Encoder().encode
_DECODER = msgspec.msgpack.Decoder(CallRow)


def call_key(session_id: str, call_id: str) -> str:
    """The key of a call's row: ``<session>/<call id>``."""
    return f"{session_id}/{call_id}"


def fates_of(runs: Sequence[DispositionRun]) -> Fates:
    """Count the positions of each fate in a call's disposition runs."""
    counts = dict.fromkeys(Fates.__struct_fields__, 0)
    for run in runs:
        counts[run.disposition] += run.last - run.first + 1
    return Fates(**counts)


def usage_row(stream_position: int, usage: ModelCallUsageReported) -> UsageRow:
    """The usage part of a row, from the report at ``stream_position`` of the calls stream."""
    return UsageRow(
        usage.input_tokens,
        usage.cached_tokens,
        usage.cache_write_tokens,
        usage.output_tokens,
        usage.latency_ms,
        usage.model,
        usage.at,
        stream_position,
    )


def call_row(stream_position: int, record: ModelCallRecorded, prior: CallRow | None = None) -> CallRow:
    """The row of the record at ``stream_position``; a call already listed keeps its place and usage."""
    return CallRow(
        call_id=record.call_id,
        session_id=record.session_id,
        stream_position=prior.stream_position if prior is not None else stream_position,
        position=record.position,
        policy=record.policy,
        policy_hash=record.policy_hash,
        budget=record.budget,
        tokenizer=record.tokenizer,
        tokens=record.tokens,
        fates=fates_of(record.dispositions),
        summary_id=record.summary_id,
        wire_format=record.wire_format,
        recorded_at=record.at,
        usage=prior.usage if prior is not None else None,
    )


def _decode(data: bytes) -> CallRow:
    try:
        return _DECODER.decode(data)
    except msgspec.DecodeError as error:
        raise StoreError(f"a row of {CALLS_VIEW} does not decode: {error}") from error


def list_calls(store: ProjectionRows, session_id: str, *, name: str = CALLS_VIEW) -> list[CallRow]:
    """Return the session's calls in the order they were recorded (one key range read)."""
    prefix = f"{session_id}/"
    # Every key with the prefix sorts after it and before ``<session>0`` ('0' follows '/').
    found = store.load_range(name, prefix, f"{session_id}0")
    rows = [_decode(data) for key, (_, data) in found.items() if key.startswith(prefix)]
    return sorted((r for r in rows if r.session_id == session_id), key=lambda r: r.stream_position)


class CallsView(SideStreamView):
    """Keeps one row per recorded model call, folded from the sessions' ``<session>::calls`` streams.

    A usage report updates its call's row (read back when the record came in an earlier batch); a
    report of a call with no record is ignored, as ``CallRecorder.calls`` ignores it.

    Args:
        store: Where the rows are (read back to join later usage reports).
        name: The name of the rows and checkpoint (another name builds a second copy beside it).
    """

    kind = CALLS_KIND

    def __init__(self, store: ProjectionRows, *, name: str = CALLS_VIEW) -> None:
        """Keep the store; nothing is read until the first batch."""
        super().__init__(store, name=name)

    def row_keys(self, session_id: str, notes: list[Notification]) -> list[str]:
        """The rows of the calls the notes record or report usage of."""
        return [
            call_key(session_id, n.event.call_id)
            for n in notes
            if isinstance(n.event, ModelCallRecorded | ModelCallUsageReported)
        ]

    def fold_session(self, session_id: str, notes: list[Notification], stored: Rows) -> Rows:
        """Fold records and usage reports into their calls' rows (a report joins a stored record)."""
        folded: dict[str, tuple[int, CallRow]] = {}
        for note in notes:
            event = note.event
            if not isinstance(event, ModelCallRecorded | ModelCallUsageReported):
                continue
            key = call_key(session_id, event.call_id)
            known = folded.get(key)
            if known is not None:
                prior: CallRow | None = known[1]
            else:
                found = stored.get(key)
                prior = _decode(found[1]) if found is not None else None
            if isinstance(event, ModelCallRecorded):
                folded[key] = (note.position, call_row(note.position, event, prior))
            elif prior is not None:
                row = msgspec.structs.replace(prior, usage=usage_row(note.position, event))
                folded[key] = (note.position, row)
        return {key: (at, _ENCODE(row)) for key, (at, row) in folded.items()}
