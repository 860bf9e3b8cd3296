"""Follow another event-sourced agent: its notifications mapped to ledger messages, each written once."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from contextledger.application.kernel.ledger import Ledger
from contextledger.application.kernel.logs import get_logger
from contextledger.domain.errors import (
    ConcurrencyConflictError,
    ConfigError,
    SessionExistsError,
    ValidationError,
)

__all__ = [
    "FollowReport",
    "Follower",
    "Mapped",
    "Skipped",
    "UpstreamLog",
    "UpstreamNotification",
]

log = get_logger(__name__)

_PAGE = 100
"""Notifications read from upstream per page."""

_RETRIES = 30
"""Attempts of an append that meets another writer of the same session (another follower, an agent)."""


_RUNS: dict[tuple[int, str], threading.Lock] = {}
_RUNS_GUARD = threading.Lock()


def _run_lock(ledger: Ledger, upstream: str) -> threading.Lock:
    """One lock per (ledger, upstream) in this process: its followers run one after the other."""
    with _RUNS_GUARD:
        return _RUNS.setdefault((id(ledger), upstream), threading.Lock())


@dataclass(frozen=True, kw_only=True)
class UpstreamNotification:
    """One notification of the upstream application: its position, event type name and event.

    ``type_name`` is the event class's qualified name (``AgentTurn.UserSaid``) or topic; ``stream_id``
    is the upstream aggregate (it names the ledger session by default); ``event`` is the decoded
    domain event, or None when its class cannot be imported here (the follower skips it).
    """

    notification_id: int
    type_name: str
    stream_id: str
    event: Any


class UpstreamLog(Protocol):
    """The port a follower reads: the upstream application's notification log, in order."""

    @property
    def name(self) -> str:
        """A stable name of the upstream application (it names the tracking and idempotency keys)."""
        ...

    def read(self, after: int, limit: int) -> Sequence[UpstreamNotification]:
        """Return at most ``limit`` notifications with ids greater than ``after``, in id order."""
        ...


Mapped = Any | Sequence[Any] | None
"""What a mapping function returns: a ledger message (object or dict), several, or None (nothing)."""


@dataclass(frozen=True, kw_only=True)
class Skipped:
    """A notification not written: its type is not in the mapping (``unmapped``) or not importable."""

    notification_id: int
    type_name: str
    reason: str = "unmapped"


@dataclass(kw_only=True)
class FollowReport:
    """What one ``Follower.run`` did: notifications read, messages written, replays found, skips."""

    position: int
    """The last upstream notification id handled (the tracking position now stored)."""
    read: int = 0
    written: int = 0
    """Ledger messages appended (a follower in another process writing the same notification at the
    same instant may make both count it; the ledger holds it once)."""
    replayed: int = 0
    """Notifications whose messages were already in the ledger (a replay after a crash)."""
    skipped: list[Skipped] = field(default_factory=list)
    sessions: set[str] = field(default_factory=set)
    """Ledger sessions written to."""


def _qualname(type_name: str) -> str:
    """``module:Class.Event`` (an eventsourcing topic) or ``Class.Event`` -> ``Class.Event``."""
    return type_name.rsplit(":", 1)[-1]


class Follower:
    """A projection of an upstream event-sourced agent into ledger sessions.

    The upstream store stays the source of truth; the ledger holds what the mapping derives from it,
    written once per upstream notification. Each notification's messages are appended in one
    transaction under the idempotency key ``follow:<upstream>:<notification id>``, and the follower's
    tracking position (the last notification handled) is kept in the ledger's database (its snapshot
    table, ``follow:<upstream>``). The two are not one transaction: after a crash between them the
    follower reads a few notifications again from its older position, and their keys make those
    writes no-ops, so nothing is ever written twice and nothing is missed. An append that loses a
    race to another writer of the session (a second follower, the agent itself) looks for its key
    again and retries, so two followers running at once (in two processes; in one process, the
    followers of a ledger and upstream run one after the other) still write each notification once.

    Args:
        ledger: The ledger to write to.
        upstream: The upstream notification log.
        mapping: Event type name (``Class.Event``, the event class's qualified name) to a function of
            the event returning ledger messages (``UserMessage``, ``AssistantMessage``, ``ToolResult``
            or their dicts), or None to write nothing for it. Types not in the mapping are skipped
            and reported.
        session_for: The ledger session of a notification (default: one session per upstream
            aggregate, started on its first message with an id derived from the aggregate id).
        session_options: Keyword arguments of ``Ledger.start_session`` for a session the follower
            starts (``system_prompt``, ``tools``...), or a function of the notification returning them.
    """

    def __init__(
        self,
        ledger: Ledger,
        upstream: UpstreamLog,
        mapping: Mapping[str, Callable[[Any], Mapped]],
        *,
        session_for: Callable[[UpstreamNotification], str] | None = None,
        session_options: Mapping[str, Any]
        | Callable[[UpstreamNotification], Mapping[str, Any]]
        | None = None,
    ) -> None:
        if not upstream.name or "\x00" in upstream.name:
            msg = "the upstream log needs a non-empty name"
            raise ConfigError(msg)
        self.ledger = ledger
        self.upstream = upstream
        self.mapping = {_qualname(k): v for k, v in mapping.items()}
        self._session_for = session_for
        self._session_options = session_options
        self._sessions: dict[str, str] = {}
        """Upstream aggregate id -> the ledger session started for it (this run's cache)."""

    @property
    def tracking_name(self) -> str:
        """The name of this follower's tracking record in the ledger's database."""
        return f"follow:{self.upstream.name}"

    def position(self) -> int:
        """The last upstream notification id handled (0 before the first)."""
        stored = self.ledger.ports.snapshots.load_snapshot(self.tracking_name)
        return 0 if stored is None else stored[0]

    def run(self, *, limit: int | None = None, page: int = _PAGE) -> FollowReport:
        """Handle the upstream notifications after the tracking position; return what was done.

        Args:
            limit: Handle at most this many notifications (default: until upstream has no more).
            page: Notifications read per upstream query.
        """
        with _run_lock(self.ledger, self.upstream.name):
            report = FollowReport(position=self.position())
            while limit is None or report.read < limit:
                want = page if limit is None else min(page, limit - report.read)
                batch = self.upstream.read(report.position, want)
                if not batch:
                    break
                for notification in batch:
                    self._handle(notification, report)
                    report.read += 1
                    report.position = notification.notification_id
                self._track(report)
            if report.skipped:
                _log_skipped(self.upstream.name, report.skipped)
            return report

    def _handle(self, notification: UpstreamNotification, report: FollowReport) -> None:
        type_name = _qualname(notification.type_name)
        mapper = self.mapping.get(type_name)
        if mapper is None or notification.event is None:
            reason = "undecodable" if notification.event is None else "unmapped"
            report.skipped.append(
                Skipped(notification_id=notification.notification_id, type_name=type_name, reason=reason)
            )
            return
        messages = _as_list(mapper(notification.event))
        if not messages:
            return
        session_id = self._session(notification)
        key = f"follow:{self.upstream.name}:{notification.notification_id}"
        for attempt in range(1, _RETRIES + 1):
            if self.ledger.log.lookup_idempotency_key(session_id, key) is not None:
                report.replayed += 1
                return
            try:
                self.ledger.append_many(session_id, messages, idempotency_key=key)
            except ConcurrencyConflictError:  # another writer appended first: look again
                if attempt == _RETRIES:
                    raise
                continue
            report.written += len(messages)
            report.sessions.add(session_id)
            return

    def _session(self, notification: UpstreamNotification) -> str:
        if self._session_for is not None:
            return self._session_for(notification)
        session_id = self._sessions.get(notification.stream_id)
        if session_id is None:
            key = f"follow:{self.upstream.name}:session:{notification.stream_id}"
            options = self._session_options
            if callable(options):
                options = options(notification)
            try:
                session_id = self.ledger.start_session(**dict(options or {}), idempotency_key=key)
            except (SessionExistsError, ConcurrencyConflictError):
                # another follower started it under the same key a moment ago: this finds it
                session_id = self.ledger.start_session(**dict(options or {}), idempotency_key=key)
            self._sessions[notification.stream_id] = session_id
        return session_id

    def _track(self, report: FollowReport) -> None:
        state = json.dumps({"skipped": len(report.skipped)}).encode()
        self.ledger.ports.snapshots.save_snapshot(self.tracking_name, report.position, state)


def _log_skipped(upstream: str, skipped: Sequence[Skipped]) -> None:
    """One warning per run for the notifications skipped, counted by type and reason."""
    counts = Counter(f"{s.type_name} ({s.reason})" for s in skipped)
    log.warning(
        "follower.skipped",
        upstream=upstream,
        skipped=len(skipped),
        first=skipped[0].notification_id,
        last=skipped[-1].notification_id,
        by_type=dict(counts.most_common()),
    )


def _as_list(mapped: Mapped) -> list[Any]:
    if mapped is None:
        return []
    if isinstance(mapped, (str, bytes)):
        msg = f"a follower mapping returned {type(mapped).__name__}, not a ledger message"
        raise ValidationError(msg)
    if isinstance(mapped, list | tuple):
        return list(mapped)
    return [mapped]  # one message (a model, which iterates over its fields, or a dict)
