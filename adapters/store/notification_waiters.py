"""Live-tail waiters: LISTEN/NOTIFY on PostgreSQL, a cheap poll of the newest notification id elsewhere."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from contextledger.adapters.store.event_store import RecorderEventStore
from contextledger.adapters.store.memory import MemoryRecorder
from contextledger.adapters.store.postgres import PostgresRecorder
from contextledger.adapters.store.postgres_horizon import listen_statements
from contextledger.adapters.store.postgres_notify import UNHEARD, UNHEARD_POLL
from contextledger.adapters.store.postgres_options import connection_settings
from contextledger.adapters.store.sqlite import SQLiteRecorder, sqlite_file
from contextledger.domain.errors import ConfigError, StoreError, StoreUnavailableError
from contextledger.domain.ports import NotificationWaiter
from psycopg.sql import Composed

__all__ = [
    "DEFAULT_INTERVAL",
    "PollingNotificationWaiter",
    "PostgresNotificationWaiter",
    "notification_waiter",
    "sqlite_waiter",
]

DEFAULT_INTERVAL = 0.05
"""Seconds between two reads of the newest notification id where no LISTEN exists (SQLite, memory)."""

_HORIZON_POLL = 0.02
"""Seconds between two looks while committed PostgreSQL rows wait above the horizon (ADR 0031)."""


def _store_error(action: str, error: Exception) -> StoreError:
    """A driver error in the package's tree: a broken or unreachable link is ``StoreUnavailableError``."""
    if isinstance(error, psycopg.OperationalError | psycopg.InterfaceError | sqlite3.OperationalError):
        return StoreUnavailableError(f"{action}: database unavailable: {error}")
    return StoreError(f"{action}: {error}")


class PollingNotificationWaiter:
    """Waits by reading the newest notification id every ``interval`` seconds (SQLite, memory).

    ``close`` (from any thread) ends a wait in progress, which returns False; later waits return False
    at once. ``latest`` is only called under the waiter's lock, never after ``release``.
    """

    def __init__(
        self,
        latest: Callable[[], int],
        *,
        interval: float = DEFAULT_INTERVAL,
        release: Callable[[], None] | None = None,
    ) -> None:
        """Poll ``latest`` (the newest notification id, 0 when none); ``release`` runs once on close."""
        if not interval > 0:
            msg = f"a notification waiter polls every positive number of seconds, not {interval}"
            raise ConfigError(msg)
        self._latest = latest
        self._interval = interval
        self._release = release
        self._lock = threading.Lock()
        self._closed = threading.Event()

    def wait(self, after: int, timeout: float) -> bool:
        """Return True once a notification id > ``after`` exists, False after ``timeout`` seconds."""
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:
            with self._lock:
                if self._closed.is_set():
                    return False
                if self._latest() > after:
                    return True
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._closed.wait(min(self._interval, remaining)):
                return False

    def close(self) -> None:
        """Stop polling and release what the waiter holds (idempotent)."""
        self._closed.set()
        with self._lock:
            release, self._release = self._release, None
            if release is not None:
                release()


def sqlite_waiter(file: Path, table: str, *, interval: float = DEFAULT_INTERVAL) -> PollingNotificationWaiter:
    """A waiter polling ``SELECT max(rowid)`` of the events ``table`` on its own connection to ``file``."""
    try:
        # mode=rw: never create a missing file. Autocommit: each read sees the newest commit (WAL).
        conn = sqlite3.connect(
            f"{file.absolute().as_uri()}?mode=rw", uri=True, timeout=5.0, isolation_level=None,
            check_same_thread=False,  # the waiter's lock serializes its use
        )  # fmt: skip
    except sqlite3.Error as error:
        raise _store_error(f"open a notification waiter on {file}", error) from error
    statement = f'SELECT max(rowid) FROM "{table}"'  # noqa: S608  # the recorder's own table name

    def latest() -> int:
        try:
            row = conn.execute(statement).fetchone()
        except sqlite3.Error as error:
            raise _store_error(f"read the newest notification id of {file}", error) from error
        return int(row[0] or 0) if row else 0

    return PollingNotificationWaiter(latest, interval=interval, release=conn.close)


class PostgresNotificationWaiter:
    """Waits on a dedicated autocommit connection that LISTENs on the recorder's channel.

    The LISTEN is issued when the waiter opens, so a NOTIFY committed between the caller's last read and
    its ``wait`` is queued, not lost; with it, the connection holds the shared lock that tells writers a
    listener exists (``listen_statements``: writers send no NOTIFY while none does, ADR 0079). ``wait``
    first reads ``max(notification_id)`` once (True at once when it is past ``after``), then blocks on
    the connection's notifications; each one is checked against the table again, so a NOTIFY of another
    ledger sharing the channel does not end the wait. For its first ``UNHEARD`` seconds, while writers that
    found no listener just before may still be quiet, it also looks every ``UNHEARD_POLL`` seconds. A
    broken connection is reopened once per wait (LISTEN and lock again, and ``UNHEARD`` anew); failing
    again, or failing to reopen, raises ``StoreError``. ``close`` (from any thread) ends a wait in
    progress, which returns False.
    """

    def __init__(self, url: str, *, channel: str, newest: Composed) -> None:
        """Open the listening connection to ``url``; ``newest`` selects the (safe, committed) newest ids."""
        kwargs, _, _ = connection_settings(url)
        self._kwargs: dict[str, Any] = {**kwargs, "application_name": "contextledger:waiter"}
        self._where = f"{kwargs['host']}:{kwargs['port']}/{kwargs['dbname']}"
        self._channel = channel
        self._newest_statement = newest
        self._lock = threading.Lock()
        self._closed = False
        self._received = 0
        self._unheard_until = 0.0
        """Until when writers may not know this listener yet (``UNHEARD``): it looks for rows by itself."""
        self._conn: psycopg.Connection[Any] = self._listen()

    @property
    def notifies_received(self) -> int:
        """How many NOTIFYs the listening connection has delivered so far (its own and other ledgers')."""
        return self._received

    @property
    def backend_pid(self) -> int:
        """The server process of the listening connection (as ``pg_stat_activity`` names it)."""
        return int(self._conn.info.backend_pid)

    def _listen(self) -> psycopg.Connection[Any]:
        try:
            conn = psycopg.connect(**self._kwargs, autocommit=True)
        except psycopg.Error as error:
            raise _store_error(f"open a listening connection to {self._where}", error) from error
        try:
            for statement in listen_statements(self._channel):  # LISTEN, then tell writers it listens
                conn.execute(statement)
        except psycopg.Error as error:
            conn.close()
            raise _store_error(f"LISTEN {self._channel} at {self._where}", error) from error
        self._unheard_until = time.monotonic() + UNHEARD
        return conn

    def wait(self, after: int, timeout: float) -> bool:
        """Return True once a notification id > ``after`` exists, False after ``timeout`` seconds."""
        deadline = time.monotonic() + max(timeout, 0.0)
        reopened = False
        while not self._closed:
            try:
                safe, committed = self._newest()
                if safe > after:
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                if committed > after:
                    # Committed rows above the horizon (ADR 0031) wait for older transactions, whose end
                    # sends no NOTIFY when they roll back or write elsewhere: look again soon.
                    self._block(min(remaining, _HORIZON_POLL))
                elif time.monotonic() < self._unheard_until:
                    # Writers that found no listener just before this one took its lock send no NOTIFY
                    # for a moment (ADR 0079): look again soon until they know it.
                    self._block(min(remaining, UNHEARD_POLL))
                elif not self._block(remaining):
                    return False  # no NOTIFY came: the timeout passed first
            except psycopg.Error as error:
                if self._closed:
                    break
                if reopened:
                    raise _store_error(f"wait for notifications at {self._where}", error) from error
                reopened = True
                self._reopen()
        return False

    def _newest(self) -> tuple[int, int]:
        """The newest notification id below the horizon, and the newest committed one."""
        row = self._conn.execute(self._newest_statement).fetchone()
        return (int(row[0] or 0), int(row[1] or 0)) if row else (0, 0)

    def _block(self, timeout: float) -> int:
        """Wait up to ``timeout`` for a NOTIFY, take every other one already delivered; return how many."""
        received = sum(1 for _ in self._conn.notifies(timeout=timeout, stop_after=1))
        if received:
            received += sum(1 for _ in self._conn.notifies(timeout=0))
        self._received += received
        return received

    def _reopen(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._conn.close()
            self._conn = self._listen()  # LISTEN again before the next check: nothing is missed

    def close(self) -> None:
        """Close the listening connection (idempotent)."""
        with self._lock:
            self._closed = True
            self._conn.close()


def notification_waiter(
    store: RecorderEventStore, *, interval: float = DEFAULT_INTERVAL
) -> NotificationWaiter:
    """The waiter fitting an opened store: LISTEN/NOTIFY on PostgreSQL, polling on SQLite and memory.

    ``interval`` is the poll period of the polling waiters (PostgreSQL does not poll).
    """
    recorder = store.recorder
    if isinstance(recorder, PostgresRecorder):
        return PostgresNotificationWaiter(
            store.url, channel=recorder.channel_name, newest=recorder.newest_statement
        )
    if isinstance(recorder, SQLiteRecorder):
        file, _ = sqlite_file(store.url)
        return sqlite_waiter(file, recorder.events_table_name, interval=interval)
    if isinstance(recorder, MemoryRecorder):
        memory = recorder
        return PollingNotificationWaiter(lambda: memory.max_notification_id() or 0, interval=interval)
    msg = f"no notification waiter for a store on {type(recorder).__name__}"
    raise ConfigError(msg)
