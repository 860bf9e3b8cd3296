"""Ports the core owns: the event log, blobs, token-count and snapshot stores, tokenizers, clock and ids."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Protocol, runtime_checkable

import msgspec
from contextledger.domain.events import AnyEvent, ForkParent, Recorded, SessionForgotten

__all__ = [
    "AppendOutcome",
    "BlobReader",
    "Checkpoints",
    "Clock",
    "EventLog",
    "IdSource",
    "LeaseHolder",
    "Notification",
    "NotificationBatch",
    "NotificationReader",
    "NotificationWaiter",
    "ProjectionCommit",
    "ProjectionLease",
    "ProjectionLeases",
    "ProjectionRows",
    "ProjectionStore",
    "ScansAhead",
    "SessionEraser",
    "SessionInfo",
    "SnapshotStore",
    "StoreHealth",
    "StreamAppend",
    "TokenCountStore",
    "TokenCounter",
    "TokenFloor",
    "TokenizerFactory",
    "VersionRegistry",
]


class AppendOutcome(msgspec.Struct, frozen=True):
    """Positions the appended events hold; ``replayed`` is true when an idempotency key matched."""

    positions: tuple[int, ...]
    replayed: bool = False


class SessionInfo(msgspec.Struct, frozen=True):
    """One stored session: its id, how many events it holds, its model and start time.

    ``parent`` is the session and position a fork continues from; a fork's ``events`` count the
    parent's prefix too (the positions ``show`` and ``render`` number), and it has the parent's model
    when it names none of its own.
    """

    session_id: str
    events: int
    model: str | None = None
    started_at: datetime | None = None
    source: str | None = None
    parent: ForkParent | None = None


class StreamAppend(msgspec.Struct, frozen=True, kw_only=True):
    """Events to append to one stream after ``expected_version``, as part of a multi-stream batch."""

    stream_id: str
    expected_version: int
    events: tuple[AnyEvent, ...]
    idempotency_key: str | None = None


class EventLog(Protocol):
    """Append-only streams of domain events with optimistic concurrency and idempotency keys.

    Every method raises only ``ContextLedgerError`` subclasses: a version conflict is a
    ``ConcurrencyConflictError``, a driver failure a ``StoreError`` with the cause chained.
    """

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
        """Append ``events`` after ``expected_version`` in one transaction, with their blobs.

        ``snapshot``: a derived snapshot ``(name, position, state)`` (``SnapshotStore.save_snapshot``) of
        what the append leads to, stored in the same transaction when the backend can, else right after
        a stored append (a failure to store it then is logged, never raised: the append succeeded).
        """
        ...

    def append_streams(
        self, appends: Sequence[StreamAppend], *, blobs: Mapping[str, str] | None = None
    ) -> None:
        """Append to several streams in ONE transaction: all of it is stored, or none of it."""
        ...

    def append_streamed(self, items: Iterable[tuple[StreamAppend, Mapping[str, str]]]) -> None:
        """Like ``append_streams``, drawing each append with its blobs only when it is written.

        Still ONE transaction: an error raised while drawing ``items`` stores none of them. A backend
        that cannot write while drawing gathers every item first, then writes them at once.
        """
        ...

    def read(self, stream_id: str, *, after: int = 0, upto: int | None = None) -> list[Recorded]:
        """Return the stream's events with positions in ``(after, upto]``, in order."""
        ...

    def version(self, stream_id: str) -> int:
        """Return the last position of the stream, 0 when it has no events."""
        ...

    def versions(self, stream_ids: Sequence[str]) -> dict[str, int]:
        """Return the last position of each of ``stream_ids`` (0 when it has no events) in ONE read."""
        ...

    def sessions(self) -> list[SessionInfo]:
        """Return every started session, oldest first."""
        ...

    def lookup_idempotency_key(self, stream_id: str, key: str) -> tuple[int, ...] | None:
        """Return the positions an earlier append with ``key`` stored, or None."""
        ...

    def writer_turn(self, stream_id: str) -> AbstractContextManager[None]:
        """Hold the stream's writer turn: other holders (any process) wait for it, first come first served.

        A writer that reads the head and appends inside its turn meets no conflict from another
        writer that does the same. A store may return a no-op context (memory, SQLite): writers then
        still race, and the loser gets ``ConcurrencyConflictError``.
        """
        ...


class BlobReader(Protocol):
    """Reads large texts stored apart from their events (written with the events, by ``EventLog.append``)."""

    def read_blob(self, sha256: str) -> str:
        """Return the text stored under ``sha256`` (its ``content_address``)."""
        ...


class SessionEraser(Protocol):
    """Erases a session for good while the log stays append-only (an encrypted store: crypto-shredding)."""

    def forget(self, session_id: str, tombstone: SessionForgotten) -> SessionForgotten:
        """Destroy the session's content, leave ``tombstone``; return the tombstone stored."""
        ...


class TokenCountStore(Protocol):
    """Token counts per (tokenizer, content address): derived data, shared by every process."""

    def load_token_counts(self, tokenizer: str, keys: Iterable[str]) -> dict[str, int]:
        """Return the cached token counts of content addresses under ``tokenizer``."""
        ...

    def save_token_counts(self, tokenizer: str, counts: Mapping[str, int]) -> None:
        """Cache token counts of content addresses under ``tokenizer``."""
        ...

    @property
    def writes_aside(self) -> bool:
        """Whether ``save_token_counts`` may run on another thread while this one reads counts."""
        ...


class SnapshotStore(Protocol):
    """Named snapshots of folded projection state: derived data, never the log."""

    def load_snapshot(self, name: str) -> tuple[int, bytes] | None:
        """Return the position and bytes of the projection snapshot called ``name``, or None."""
        ...

    def save_snapshot(self, name: str, position: int, state: bytes) -> None:
        """Store (replace) the projection snapshot called ``name``."""
        ...


class Notification(msgspec.Struct, frozen=True):
    """One stored event in store order: its notification id, stream, position in the stream, and event."""

    id: int
    stream_id: str
    position: int
    event: AnyEvent


class NotificationBatch(msgspec.Struct, frozen=True):
    """A page of notifications: those a reader kept, and the last id it scanned (0 when none)."""

    last_id: int
    notifications: list[Notification]


class ProjectionCommit(msgspec.Struct, frozen=True):
    """Rows of one view and the checkpoint they bring it to, committed together.

    ``rows_of`` names the view's rows; ``tracking_of`` its checkpoint (the same name, or one per
    shard when several runners each fold a share of the sessions into the same rows).
    """

    rows_of: str
    tracking_of: str
    tracking: int
    rows: Mapping[str, tuple[int, bytes]]


class NotificationReader(Protocol):
    """Every stream's events in store (notification) order; ids may have gaps (rolled-back writes)."""

    def read_notifications(self, after: int, limit: int) -> list[Notification]:
        """Return up to ``limit`` notifications with ids greater than ``after``, in id order."""
        ...

    def read_batch(
        self, after: int, limit: int, keep: Callable[[str], bool] | None = None
    ) -> NotificationBatch:
        """Scan up to ``limit`` notifications after ``after``; decode only the streams ``keep`` accepts."""
        ...

    def head(self) -> int:
        """Return the id of the newest notification, 0 when the store holds none."""
        ...


@runtime_checkable
class ScansAhead(Protocol):
    """A ``NotificationReader`` that can gather its next page beside the caller's work (SQLite's)."""

    def scan_ahead(self, after: int, limit: int) -> None:
        """Start reading the page that ``read_batch(after, limit)`` (every stream kept) will ask for next."""
        ...

    def end_scans(self) -> None:
        """Wait for a page started by ``scan_ahead`` that no read took, and drop it."""
        ...


class NotificationWaiter(Protocol):
    """Wakes a live tail when notifications after a position may exist (LISTEN/NOTIFY, or a cheap poll)."""

    def wait(self, after: int, timeout: float) -> bool:
        """Block until a notification with id > ``after`` may exist, or ``timeout`` seconds pass.

        Return whether one may exist (True) or the timeout passed first (False).
        """
        ...

    def close(self) -> None:
        """Release what the waiter holds (a listening connection); idempotent."""
        ...


class ProjectionLease(Protocol):
    """The right to write one projection, held by one runner at a time."""

    def release(self) -> None:
        """Give the projection up (idempotent)."""
        ...


class Checkpoints(Protocol):
    """How far each view has folded the notifications, committed together with its rows."""

    def load_tracking(self, projection: str) -> int:
        """Return the last notification id folded into ``projection``, 0 when none."""
        ...

    def checkpoints(self) -> dict[str, int]:
        """Return every checkpoint (views and their shards) with its position."""
        ...

    def commit(self, projection: str, tracking: int, rows: Mapping[str, tuple[int, bytes]]) -> None:
        """Store ``rows`` (key -> position, bytes) and the tracking position together, or nothing."""
        ...

    def commit_many(self, commits: Sequence[ProjectionCommit]) -> None:
        """Store several views' rows and checkpoints in ONE transaction, or nothing."""
        ...

    def commit_aside(self, commits: Sequence[ProjectionCommit]) -> None:
        """Start ``commit_many(commits)`` and return at once; the caller's reads see its rows already.

        The previous commit set aside is settled first. A store may also commit before returning.
        """
        ...

    def settle(self) -> None:
        """Wait for the commit set aside, if any; raise its error (then none of its rows was written)."""
        ...


class ProjectionRows(Protocol):
    """Reading a view's rows back (key -> position, bytes), and dropping a view."""

    def load_range(self, projection: str, after_key: str, upto_key: str) -> dict[str, tuple[int, bytes]]:
        """Return the rows with ``after_key < key <= upto_key`` (keys compare as text)."""
        ...

    def load_row(self, projection: str, key: str) -> tuple[int, bytes] | None:
        """Return one row of ``projection`` (position, bytes), or None."""
        ...

    def load_rows(self, projection: str, keys: Sequence[str]) -> dict[str, tuple[int, bytes]]:
        """Return the rows of ``keys`` that exist (one read for a whole batch)."""
        ...

    def row_keys(self, projection: str) -> list[str]:
        """Return every row key of ``projection``, sorted."""
        ...

    def drop(self, projection: str) -> None:
        """Delete the rows and checkpoints (its shards' too) of ``projection``; the registry stays."""
        ...


class VersionRegistry(Protocol):
    """Which version of a view serves it (and each version's recorded config), one atomic write each."""

    def activate(self, name: str, version: str) -> None:
        """Make ``version`` the active projection serving ``name`` (one atomic write)."""
        ...

    def active(self, name: str) -> str | None:
        """Return the active version of ``name``, or None."""
        ...


class LeaseHolder(msgspec.Struct, frozen=True, kw_only=True):
    """A projection lease as the store holds it: who, until when (None: while its connection lives)."""

    projection: str
    holder: str
    expires: datetime | None
    alive: bool
    """Whether the holder may still be running (unexpired and, on this host, its process exists)."""


class ProjectionLeases(Protocol):
    """One writer per view at a time."""

    def acquire(self, projection: str) -> ProjectionLease:
        """Take the one-writer lease of ``projection``; ``ProjectionLockedError`` when it is held."""
        ...

    def leases(self, names: Collection[str] | None = None) -> list[LeaseHolder]:
        """Every projection lease currently held (or left behind by a holder that died); of ``names`` only."""
        ...


class StoreHealth(ProjectionLeases, Protocol):
    """What ``doctor`` asks a store about itself: the schema it carries and the leases held on it."""

    def schema_version(self) -> int | None:
        """The schema version the database records (None: a store that keeps none, such as memory)."""
        ...


class ProjectionStore(Checkpoints, ProjectionRows, VersionRegistry, ProjectionLeases, Protocol):
    """Persistent views, all four parts: an adapter implements them together, a use case names its part.

    Rows and tracking are written in ONE transaction (``Checkpoints``), read back (``ProjectionRows``);
    the active version of each view is registered (``VersionRegistry``); one runner writes a view at a
    time (``ProjectionLeases``).
    """


class TokenCounter(Protocol):
    """Counts tokens of text for one tokenizer; ``name`` identifies it in caches and audits."""

    @property
    def name(self) -> str:
        """Stable identifier, e.g. ``cl100k_base`` or ``heuristic-v2+25%``."""
        ...

    def count(self, text: str) -> int:
        """Return the number of tokens of ``text``."""
        ...

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Return the token counts of several texts."""
        ...


@runtime_checkable
class TokenFloor(Protocol):
    """A tokenizer that bounds a count from below without tokenizing (optional, next to ``TokenCounter``)."""

    def tokens_at_least(self, text: str) -> int:
        """Return a number of tokens ``count(text)`` is never below (0 when nothing is known).

        The bound never falls when the text grows: a text's bound is at least that of any run of its
        whole lines (the card gives up a view once some of its lines are already above its cap).
        """
        ...


class Clock(Protocol):
    """Source of the current time, passed into the core (it never reads the machine clock)."""

    def now(self) -> datetime:
        """Return the current time, timezone-aware."""
        ...


class IdSource(Protocol):
    """Source of new unique ids (session ids, summary ids)."""

    def new_id(self) -> str:
        """Return a fresh unique id."""
        ...


class TokenizerFactory(Protocol):
    """Returns the token counter a name stands for (``cl100k_base``, ``o200k_base``, ``heuristic``)."""

    def __call__(self, name: str) -> TokenCounter:
        """Return the counter called ``name``; raise ``TokenizerError`` when it cannot be had."""
        ...
