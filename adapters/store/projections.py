"""``NotificationReader`` and ``ProjectionStore`` over an opened store's recorder (all three backends)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

from contextledger.adapters.store.commit_aside import AsideCommit
from contextledger.adapters.store.event_store import RecorderEventStore
from contextledger.adapters.store.guards import translated
from contextledger.adapters.store.notification_scan import NotificationScan, ScansPages, batch_of
from contextledger.adapters.store.projection_tables import ProjectionTables, new_owner
from contextledger.adapters.store.sealing import TOMBSTONE_TOPIC
from contextledger.application.kernel.aside import Ahead
from contextledger.domain.ports import LeaseHolder, Notification, NotificationBatch, ProjectionCommit

__all__ = ["RecorderProjections"]


class _Lease:
    """A held projection lease; ``release`` gives it back once."""

    def __init__(self, tables: ProjectionTables, projection: str, owner: str) -> None:
        self._tables = tables
        self._projection = projection
        self._owner = owner
        self._held = True

    def release(self) -> None:
        """Give the lease up (idempotent)."""
        if self._held:
            self._held = False
            with translated(f"release projection {self._projection}"):
                self._tables.projection_release(self._projection, self._owner)


class RecorderProjections:
    """Reads every stream in store order and keeps projection rows with their tracking position.

    Notifications are read with eventsourcing's ``select_notifications`` from ``after + 1``: ids a
    rolled-back PostgreSQL transaction consumed are simply absent, so gaps are skipped, never waited on.
    """

    def __init__(self, store: RecorderEventStore) -> None:
        """Wrap an opened store (its recorder holds the projection tables)."""
        self.store = store
        self._tables: ProjectionTables = store.recorder  # type: ignore[assignment]  # the recorders of this package
        self.owner = new_owner()
        self._pages = self._tables if isinstance(self._tables, ScansPages) else None
        """The tables, when they gather pages of stored events (``read_batch``)."""
        self._pending: tuple[tuple[int, int], Ahead[NotificationScan]] | None = None
        """The page ``scan_ahead`` is gathering, until a read takes it."""
        self._aside: AsideCommit | None = None
        """The commit running on its own thread (``commit_aside``), until ``settle``."""

    def read_notifications(self, after: int, limit: int) -> list[Notification]:
        """Return up to ``limit`` notifications with ids greater than ``after``, in id order."""
        return self.read_batch(after, limit).notifications

    def read_batch(
        self, after: int, limit: int, keep: Callable[[str], bool] | None = None
    ) -> NotificationBatch:
        """Scan up to ``limit`` notifications after ``after``; decode only the streams ``keep`` accepts.

        Where the tables gather pages (SQLite) and every stream is kept in plaintext, the page is
        read gathered (the one ``scan_ahead`` started, when it named this read) and decoded at once;
        a page that cannot be (``batch_of``) is read row by row, as every other page is.
        """
        pending, self._pending = self._pending, None
        pages = self._pages if keep is None and self.store.sealer is None else None
        with translated("read notifications"):
            scan = _taken(pending, (after, limit))
            if scan is None and pages is not None:
                scan = pages.notification_scan(after, limit)
        if scan is not None and pages is not None:
            batch = batch_of(scan, self.store.mapper, TOMBSTONE_TOPIC)
            if batch is not None:
                return batch
        with translated("read notifications"):
            rows = self._tables.notification_rows(after, limit)
        decode = self.store.mapper.decode
        sealer = self.store.sealer
        kept = [
            Notification(row_id, stream, position, decode(stream, position, topic, state))
            for row_id, stream, position, topic, state in rows
            if (keep is None or keep(stream))
            and topic != TOMBSTONE_TOPIC  # a forgotten session is skipped whole: tombstone and events
            and (sealer is None or not sealer.forgotten(stream))
        ]
        return NotificationBatch(rows[-1][0] if rows else 0, kept)

    def scan_ahead(self, after: int, limit: int) -> None:
        """Start gathering the page ``read_batch(after, limit)`` will ask for, on a thread of its own.

        Only where ``read_batch`` reads pages gathered and a commit may run beside a read (a SQLite
        file): SQLite gathers the page with the GIL released, so the caller folds on meanwhile.
        """
        if self._pending is not None and self._pending[0] == (after, limit):
            return  # asked again before the read: that page is under way
        self.end_scans()
        pages = self._pages
        if pages is not None and self._tables.writes_aside and self.store.sealer is None:
            scan = Ahead(lambda: pages.notification_scan(after, limit), name="contextledger-scan")
            self._pending = ((after, limit), scan)

    def end_scans(self) -> None:
        """Wait for a page ``scan_ahead`` started that no read took, and drop it."""
        pending, self._pending = self._pending, None
        with translated("read notifications"):
            _taken(pending, None)

    def head(self) -> int:
        """Return the id of the newest notification, 0 when the store holds none."""
        with translated("read the newest notification id"):
            return int(self.store.recorder.max_notification_id() or 0)

    def schema_version(self) -> int | None:
        """The schema version the database records (None: a memory store keeps none)."""
        with translated("read the schema version"):
            return self._tables.stored_schema_version()

    def leases(self, names: Collection[str] | None = None) -> list[LeaseHolder]:
        """Every projection lease held (or left by a holder that died, then not alive); of ``names`` only."""
        with translated("list projection leases"):
            return self._tables.projection_leases(names)

    def checkpoints(self) -> dict[str, int]:
        """Return every checkpoint (views and their shards) with its position."""
        with translated("list checkpoints"):
            return self._tables.projection_checkpoints()

    def load_tracking(self, projection: str) -> int:
        """Return the last notification id folded into ``projection``, 0 when none."""
        with translated(f"load tracking of {projection}"):
            return self._tables.projection_tracking(projection)

    def commit(self, projection: str, tracking: int, rows: Mapping[str, tuple[int, bytes]]) -> None:
        """Store ``rows`` and the tracking position in one transaction."""
        self.commit_many([ProjectionCommit(projection, projection, tracking, rows)])

    def commit_many(self, commits: Sequence[ProjectionCommit]) -> None:
        """Store several views' rows and checkpoints in one transaction (after the commit set aside)."""
        self.settle()
        self._commit(commits)

    def commit_aside(self, commits: Sequence[ProjectionCommit]) -> None:
        """Start ``commit_many(commits)`` on a thread of its own once the previous one is settled.

        This thread reads the rows as written from now on; ``settle`` waits and raises the commit's
        error. A store whose readers would wait for the writer (memory, SQLite in memory) commits now.
        """
        self.settle()
        if self._tables.writes_aside:
            self._aside = AsideCommit(self._commit, commits)
        else:
            self._commit(commits)

    def settle(self) -> None:
        """Wait for the commit started by ``commit_aside``, if any; raise its error."""
        aside, self._aside = self._aside, None
        if aside is not None:
            aside.settle()

    def _commit(self, commits: Sequence[ProjectionCommit]) -> None:
        names = ", ".join(c.tracking_of for c in commits)
        sealer = self.store.sealer
        if sealer is not None:
            commits = [
                ProjectionCommit(
                    c.rows_of,
                    c.tracking_of,
                    c.tracking,
                    {k: (at, sealer.seal_bytes(state)) for k, (at, state) in c.rows.items()},
                )
                for c in commits
            ]
        with translated(f"commit projections {names}"):
            self._tables.projection_commit(commits, self.owner)

    def load_range(self, projection: str, after_key: str, upto_key: str) -> dict[str, tuple[int, bytes]]:
        """Return the rows with ``after_key < key <= upto_key``."""
        with translated(f"load rows of {projection}"):
            found = self._opened(self._tables.projection_range(projection, after_key, upto_key))
        return self._written(projection, found, lambda key: after_key < key <= upto_key)

    def load_row(self, projection: str, key: str) -> tuple[int, bytes] | None:
        """Return one row of ``projection``, or None."""
        with translated(f"load row of {projection}"):
            row = self._tables.projection_row(projection, key)
        found = {} if row is None else self._opened({key: row})
        return self._written(projection, found, lambda k: k == key).get(key)

    def load_rows(self, projection: str, keys: Sequence[str]) -> dict[str, tuple[int, bytes]]:
        """Return the rows of ``keys`` that exist, in one read."""
        if not keys:
            return {}
        with translated(f"load rows of {projection}"):
            found = self._opened(self._tables.projection_rows(projection, keys))
        wanted = set(keys)
        return self._written(projection, found, wanted.__contains__)

    def _written(
        self, projection: str, found: dict[str, tuple[int, bytes]], keys: Callable[[str], bool]
    ) -> dict[str, tuple[int, bytes]]:
        """``found`` with the rows of the commit set aside, when this thread set it aside."""
        aside = self._aside
        return found if aside is None else aside.overlay(projection, found, keys)

    def _opened(self, rows: dict[str, tuple[int, bytes]]) -> dict[str, tuple[int, bytes]]:
        """Rows as read: decrypted when the ledger is encrypted (a row that does not is left out: rebuilt)."""
        sealer = self.store.sealer
        if sealer is None:
            return rows
        opened: dict[str, tuple[int, bytes]] = {}
        for key, (at, sealed) in rows.items():
            state = sealer.open_bytes(sealed)
            if state is not None:
                opened[key] = (at, state)
        return opened

    def row_keys(self, projection: str) -> list[str]:
        """Return every row key of ``projection``, sorted."""
        with translated(f"list rows of {projection}"):
            keys = self._tables.projection_keys(projection)
        added = self._written(projection, {}, lambda _: True)
        return sorted({*keys, *added}) if added else keys

    def drop(self, projection: str) -> None:
        """Delete the rows and tracking of ``projection`` (after the commit set aside)."""
        self.settle()
        with translated(f"drop projection {projection}"):
            self._tables.projection_drop(projection)

    def activate(self, name: str, version: str) -> None:
        """Make ``version`` the active projection serving ``name`` (after the commit set aside)."""
        self.settle()
        with translated(f"activate {version} for {name}"):
            self._tables.projection_activate(name, version)

    def active(self, name: str) -> str | None:
        """Return the active version of ``name``, or None."""
        with translated(f"read active version of {name}"):
            return self._tables.projection_active(name)

    def acquire(self, projection: str) -> _Lease:
        """Take the one-writer lease of ``projection`` (``ProjectionLockedError`` when held elsewhere)."""
        with translated(f"lock projection {projection}"):
            self._tables.projection_acquire(projection, self.owner)
        return _Lease(self._tables, projection, self.owner)

    def renew(self, projection: str) -> None:
        """Extend the held lease (a runner idling in its live tail calls this)."""
        with translated(f"renew lease of {projection}"):
            self._tables.projection_acquire(projection, self.owner)


def _taken(
    pending: tuple[tuple[int, int], Ahead[NotificationScan]] | None, read: tuple[int, int] | None
) -> NotificationScan | None:
    """The page gathered for ``read`` (``(after, limit)``), or None.

    A page gathered for another read is waited for all the same (it ends before its connection is
    reused), then dropped.
    """
    if pending is None:
        return None
    scan = pending[1].result()
    return scan if pending[0] == read else None
