"""Forked sessions (seed 000): a child continues a parent's history up to a position, without copying it.

A fork's stream stores only its own events: its ``SessionStarted`` (with ``parent``) and what comes
after. ``ForkAwareLog`` presents it as one history in *virtual positions*: position 1 is the child's
``SessionStarted``, positions ``2..P`` are the parent's (read from the parent, itself possibly a
fork), and the child's own event at stream version ``v >= 2`` is position ``P + v - 1``. Everything
above the log (rules, renders, pins, search, why) sees that one history; the parent is never written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager

import msgspec
from contextledger.application.kernel.messages import SIDE_STREAM_SEPARATOR, check_stream_id
from contextledger.application.kernel.session_port import SessionLedger
from contextledger.application.kernel.summary_log import SummaryStream
from contextledger.domain.errors import ConcurrencyConflictError, ValidationError
from contextledger.domain.events import AnyEvent, ForkParent, Recorded, SessionStarted, SummaryRecorded
from contextledger.domain.ports import AppendOutcome, EventLog, SessionInfo, StreamAppend
from contextledger.projections.fold import FORK_START

__all__ = ["ForkAwareLog", "fork_parent", "fork_session", "summary_in_force"]


class ForkAwareLog:
    """An ``EventLog`` that shows each forked session as its parent's prefix followed by its own events.

    Streams that are not sessions (``<session>::summaries``, ``::calls``) and sessions without a parent
    pass through unchanged. A stream's parent is read once (its first event never changes).
    """

    def __init__(self, inner: EventLog) -> None:
        """Wrap ``inner``."""
        self.inner = inner
        self._links: dict[str, ForkParent | None] = {}

    # -- the fork link ------------------------------------------------------------------------

    def parent_of(self, stream_id: str) -> ForkParent | None:
        """Return the fork parent of a session stream, or None (a root session, or not a session)."""
        if SIDE_STREAM_SEPARATOR in check_stream_id(stream_id):
            return None
        if stream_id in self._links:
            return self._links[stream_id]
        first = self.inner.read(stream_id, after=0, upto=1)
        if not first:
            return None  # not started yet: nothing to remember
        event = first[0].event
        link = event.parent if isinstance(event, SessionStarted) else None
        self._links[stream_id] = link
        return link

    def virtual_position(self, stream_id: str, stream_position: int, event: AnyEvent) -> int:
        """Return the session position of a stored event (a fork's own events follow its parent's prefix).

        ``event`` is the stored event itself: a session's first event (``SessionStarted``) teaches
        the link without a read, so folding notifications in store order reads no stream twice.
        """
        if (
            stream_position == 1
            and isinstance(event, SessionStarted)
            and SIDE_STREAM_SEPARATOR not in stream_id
        ):
            self._links[stream_id] = event.parent
        link = self.parent_of(stream_id)
        return stream_position if link is None else self._to_virtual(link, stream_position)

    def _learn(self, stream_id: str, events: Sequence[AnyEvent], expected_version: int) -> ForkParent | None:
        if expected_version == 0 and events and isinstance(events[0], SessionStarted):
            self._links[stream_id] = events[0].parent
        return self.parent_of(stream_id)

    @staticmethod
    def _to_virtual(link: ForkParent, stream_position: int) -> int:
        return stream_position if stream_position <= 1 else stream_position + link.position - 1

    @staticmethod
    def _to_stream(stream_id: str, link: ForkParent, version: int) -> int:
        if version == 0:
            return 0
        if version < link.position:
            raise ConcurrencyConflictError(stream_id, version)
        return version - link.position + 1

    # -- EventLog -----------------------------------------------------------------------------

    def append(
        self,
        stream_id: str,
        expected_version: int,
        events: Sequence[AnyEvent],
        *,
        blobs: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
        snapshot: tuple[str, int, bytes] | None = None,
    ) -> AppendOutcome:
        """Append after a virtual ``expected_version``; return virtual positions (``snapshot``: as given)."""
        check_stream_id(stream_id)
        link = self._learn(stream_id, events, expected_version)
        own = expected_version if link is None else self._to_stream(stream_id, link, expected_version)
        outcome = self.inner.append(
            stream_id,
            own,
            events,
            blobs=blobs,
            idempotency_key=idempotency_key,
            snapshot=snapshot,
        )
        if link is None:
            return outcome
        positions = tuple(self._to_virtual(link, p) for p in outcome.positions)
        return AppendOutcome(positions, replayed=outcome.replayed)

    def append_streams(
        self, appends: Sequence[StreamAppend], *, blobs: Mapping[str, str] | None = None
    ) -> None:
        """Append to several streams in one transaction, translating forked streams' versions."""
        self.inner.append_streams([self._translated(item) for item in appends], blobs=blobs)

    def append_streamed(self, items: Iterable[tuple[StreamAppend, Mapping[str, str]]]) -> None:
        """``append_streams`` drawing each append as it is written, translating forked streams' versions."""
        self.inner.append_streamed((self._translated(item), blobs) for item, blobs in items)

    def _translated(self, item: StreamAppend) -> StreamAppend:
        """The append with its expected version in the stream's own positions (a fork's differ)."""
        check_stream_id(item.stream_id)
        link = self._learn(item.stream_id, item.events, item.expected_version)
        if link is None:
            return item
        version = self._to_stream(item.stream_id, link, item.expected_version)
        return msgspec.structs.replace(item, expected_version=version)

    def read(self, stream_id: str, *, after: int = 0, upto: int | None = None) -> list[Recorded]:
        """Return the events at virtual positions ``(after, upto]``: the parent's prefix, then the child's."""
        link = self.parent_of(stream_id)
        if link is None:
            return self.inner.read(stream_id, after=after, upto=upto)
        fork_at = link.position
        out: list[Recorded] = []
        if after < 1 and (upto is None or upto >= 1):
            out.extend(self.inner.read(stream_id, after=0, upto=1))
        if after < fork_at and (upto is None or upto > 1):
            prefix_upto = fork_at if upto is None else min(upto, fork_at)
            out.extend(r for r in self.read(link.session_id, after=max(after, 1), upto=prefix_upto))
        if upto is None or upto > fork_at:
            own_after = max(after - fork_at + 1, 1)
            own_upto = None if upto is None else upto - fork_at + 1
            out.extend(
                Recorded(r.position + fork_at - 1, r.event)
                for r in self.inner.read(stream_id, after=own_after, upto=own_upto)
            )
        return out

    def version(self, stream_id: str) -> int:
        """Return the virtual position of the stream's last event (0 when it has none)."""
        return self._virtual_head(stream_id, self.inner.version(check_stream_id(stream_id)))

    def versions(self, stream_ids: Sequence[str]) -> dict[str, int]:
        """Return the virtual position of each stream's last event (0 when it has none), in one read."""
        return self.virtual_heads(self.inner.versions([check_stream_id(s) for s in stream_ids]))

    def virtual_heads(self, stored: Mapping[str, int]) -> dict[str, int]:
        """The virtual positions of streams' stored heads (``inner.versions``, read on any thread)."""
        return {stream_id: self._virtual_head(stream_id, version) for stream_id, version in stored.items()}

    def _virtual_head(self, stream_id: str, version: int) -> int:
        """The virtual position of a stream's stored head ``version`` (a fork's head follows its prefix)."""
        link = self.parent_of(stream_id) if version else None
        return version if link is None else self._to_virtual(link, version) if version > 1 else link.position

    def sessions(self) -> list[SessionInfo]:
        """Return every started session; a fork's events count its parent's prefix, as its positions do.

        ``sessions`` said 2 events of a fork that ``show`` listed 11 of (its own pin and start only), and
        no model. A parent is stored before its forks, so its model is known when a fork is met.
        """
        models: dict[str, str | None] = {}
        out: list[SessionInfo] = []
        for stored in self.inner.sessions():
            link = stored.parent
            info = stored
            if link is not None:
                self._links.setdefault(stored.session_id, link)
                model = stored.model or models.get(link.session_id)
                head = self._virtual_head(stored.session_id, stored.events)
                info = msgspec.structs.replace(stored, events=head, model=model)
            models[info.session_id] = info.model
            out.append(info)
        return out

    def lookup_idempotency_key(self, stream_id: str, key: str) -> tuple[int, ...] | None:
        """Return the virtual positions an earlier append with ``key`` stored, or None."""
        found = self.inner.lookup_idempotency_key(check_stream_id(stream_id), key)
        link = self.parent_of(stream_id)
        if found is None or link is None:
            return found
        return tuple(self._to_virtual(link, p) for p in found)

    def writer_turn(self, stream_id: str) -> AbstractContextManager[None]:
        """The stored stream's writer turn (a fork's own events are its stored stream)."""
        return self.inner.writer_turn(stream_id)


def summary_in_force(ledger: SessionLedger, session_id: str, position: int) -> SummaryRecorded | None:
    """Return the artifact in force at ``position``: available by then, reaching furthest (latest wins)."""
    best: SummaryRecorded | None = None
    for summary in ledger.summaries(session_id):
        due = summary.produced_at <= position and summary.covers_through <= position
        if due and (best is None or summary.covers_through >= best.covers_through):
            best = summary
    return best


def fork_parent(ledger: SessionLedger, session_id: str, parent: object) -> ForkParent | None:
    """A start's ``parent``, checked: a ``(session id, position)`` of an existing other session's events.

    An unchecked parent (itself, unknown, past its head) made every read or append of the session fail,
    and a session its own parent made every rebuild of the ledger fail (the log keeps it for good).

    Raises:
        ValidationError: not such a pair, the session itself, or a position outside the parent.
        SessionNotFoundError: the parent does not exist (``SessionForgottenError``: it, or one it was forked
            from, was forgotten: the child would hold what was erased).
    """
    if parent is None:
        return None
    if not (
        isinstance(parent, tuple | list)
        and len(parent) == 2  # noqa: PLR2004 - a pair
        and isinstance(parent[0], str)
        and isinstance(parent[1], int)
        and not isinstance(parent[1], bool)
    ):
        msg = f"parent must be a (session id, position) pair, got {parent!r}"
        raise ValidationError(msg)
    parent_id, at = parent
    if parent_id == session_id:
        msg = f"session {session_id!r} cannot be its own parent"
        raise ValidationError(msg)
    head = ledger.version(parent_id)
    if not 1 <= at <= head:
        msg = f"fork position {at} is outside session {parent_id!r} (1..{head})"
        raise ValidationError(msg)
    ancestor: str | None = parent_id
    while ancestor is not None:  # each one's own start: SessionForgottenError when it was forgotten
        start = ledger.events(ancestor, upto=1)[0].event
        ancestor = start.parent.session_id if isinstance(start, SessionStarted) and start.parent else None
    return ForkParent(session_id=parent_id, position=at)


def fork_session(
    ledger: SessionLedger,
    session_id: str,
    at: int,
    *,
    from_summary: bool = False,
    new_session_id: str | None = None,
    metadata: Mapping[str, object] | None = None,
) -> str:
    """Start a session that continues ``session_id`` after position ``at``; return its id.

    The child references the parent's events ``1..at`` (nothing is copied; the parent is not
    written). With ``from_summary``, the child starts from the summary in force at ``at``: that
    artifact is recorded in the child's summary stream, produced at the fork point, and is applied
    there at once (under policies that use summaries), instead of the full history it covers.

    Raises:
        SessionNotFoundError: The parent does not exist.
        ValidationError: ``at`` is outside the parent, or ``from_summary`` and no summary is in force.
    """
    head = ledger.version(session_id)
    if not 1 <= at <= head:
        raise ValidationError(f"fork position {at} is outside session {session_id!r} (1..{head})")
    summary = summary_in_force(ledger, session_id, at) if from_summary else None
    if from_summary and summary is None:
        raise ValidationError(f"no summary of session {session_id!r} is in force at position {at}")
    root = ledger.events(session_id, upto=1)[0].event
    assert isinstance(root, SessionStarted)  # noqa: S101 - position 1 of a session is its start
    child = ledger.start_session(
        session_id=new_session_id,
        system_prompt=root.system_prompt,
        model=root.model,
        tools=[msgspec.to_builtins(t) for t in root.tools],
        metadata=dict(metadata or {}),
        parent=(session_id, at),
    )
    if summary is not None:
        copy = msgspec.structs.replace(
            summary,
            summary_id=ledger.ids.new_id(),
            session_id=child,
            produced_at=at,
            previous_summary_id=summary.summary_id,
            producer="api",
            meta={**summary.meta, FORK_START: True, "forked_from": session_id},
            at=ledger.clock.now(),
        )
        SummaryStream(ledger.log, child).append(copy)
    return child
