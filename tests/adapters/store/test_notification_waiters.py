"""Live-tail waiters on every backend: timeouts, wake-ups from other threads and connections, LISTEN on PG."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import contextledger
import psycopg
import pytest
from contextledger.adapters.store import notification_waiters, postgres_notify
from contextledger.adapters.store.event_store import RecorderEventStore
from contextledger.adapters.store.notification_waiters import (
    PollingNotificationWaiter,
    PostgresNotificationWaiter,
    notification_waiter,
    sqlite_waiter,
)
from contextledger.adapters.store.postgres import PostgresRecorder
from contextledger.adapters.store.postgres_horizon import listen_statements
from contextledger.adapters.store.postgres_options import connection_settings
from contextledger.domain.errors import ConfigError, StoreError, StoreUnavailableError
from contextledger.domain.events import SessionStarted
from eventsourcing.popo import POPOApplicationRecorder
from eventsourcing.postgres import PostgresDatastore
from psycopg.sql import SQL, Identifier

LONG = 30.0
"""A timeout no wake-up should come near: a wait that returns True returned before it."""


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store of each backend."""
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ledger.db'}"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def ledger(url: str) -> Iterator[contextledger.Ledger]:
    """The ledger the waiter follows."""
    with contextledger.open_ledger(url) as opened:
        yield opened


@pytest.fixture
def writer(url: str, ledger: contextledger.Ledger) -> Iterator[contextledger.Ledger]:
    """Another ledger object (its own connections) on the same store; memory has only the one."""
    if url == "memory://":
        yield ledger
        return
    with contextledger.open_ledger(url) as opened:
        yield opened


@pytest.fixture
def waiter(ledger: contextledger.Ledger) -> Iterator[object]:
    """The waiter the factory picks for the ledger's store."""
    opened = notification_waiter(ledger.ports.log)
    yield opened
    opened.close()


def newest(ledger: contextledger.Ledger) -> int:
    """The store's newest notification id, 0 when it is empty."""
    return int(ledger.ports.log.recorder.max_notification_id() or 0)


def wait_in_thread(
    waiter, after: int, timeout: float
) -> tuple[threading.Thread, threading.Event, list[bool]]:
    """Start ``waiter.wait`` in another thread; return it, an event set just before the wait, its result."""
    result: list[bool] = []
    started = threading.Event()

    def run() -> None:
        started.set()
        result.append(waiter.wait(after, timeout))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    time.sleep(0.3)  # lets the wait get past its first check and block (not asserted: any order must pass)
    return thread, result


def test_the_factory_picks_the_waiter_of_each_backend(ledger, waiter, url):
    """LISTEN on PostgreSQL, polling on SQLite and memory."""
    expected = PostgresNotificationWaiter if url.startswith("postgresql") else PollingNotificationWaiter
    assert type(waiter) is expected


def test_wait_returns_false_after_the_timeout_when_nothing_is_appended(ledger, waiter):
    """No notification past ``after``: the wait ends with False, on an empty store and a filled one."""
    assert waiter.wait(0, 0.2) is False
    ledger.start_session(model="m")
    assert waiter.wait(newest(ledger), 0.2) is False


def test_a_notification_stored_before_the_wait_returns_true(ledger, writer):
    """Stored before the waiter existed (no NOTIFY can reach it): the first check finds it."""
    before = newest(ledger)
    writer.start_session(model="m")
    late = notification_waiter(ledger.ports.log)
    try:
        assert late.wait(before, LONG) is True
        assert late.wait(before, 0) is True
    finally:
        late.close()


def test_an_append_between_the_last_read_and_the_wait_is_not_missed(ledger, writer, waiter):
    """The waiter exists, the caller reads, another writer appends, then the caller waits: True."""
    before = newest(ledger)
    writer.start_session(model="m")
    assert waiter.wait(before, LONG) is True


def test_an_append_from_another_thread_and_connection_wakes_a_blocked_wait(ledger, writer, waiter):
    """A wait blocked in one thread returns True when another ledger object appends in this one."""
    before = newest(ledger)
    thread, result = wait_in_thread(waiter, before, LONG)
    writer.start_session(model="m")
    thread.join(2 * LONG)
    assert result == [True]


def test_close_is_idempotent_and_ends_a_blocked_wait(ledger, waiter):
    """Closing twice is fine; a wait blocked in another thread, and every later wait, return False."""
    thread, result = wait_in_thread(waiter, newest(ledger), LONG)
    waiter.close()
    waiter.close()
    thread.join(2 * LONG)
    assert result == [False]
    ledger.start_session(model="m")
    assert waiter.wait(0, LONG) is False


def test_a_poll_interval_must_be_positive():
    """Zero or negative intervals are configuration errors."""
    with pytest.raises(ConfigError, match="positive"):
        PollingNotificationWaiter(lambda: 0, interval=0)


def test_a_store_of_no_known_recorder_has_no_waiter():
    """The factory refuses a recorder it does not know."""
    with pytest.raises(ConfigError, match="POPOApplicationRecorder"):
        notification_waiter(RecorderEventStore(POPOApplicationRecorder(), url="memory://"))


def test_sqlite_waiter_refuses_a_missing_file_and_reports_a_missing_table(tmp_path):
    """A missing file is not created; a file without the events table fails the wait with StoreError."""
    with pytest.raises(StoreUnavailableError, match="notification waiter"):
        sqlite_waiter(tmp_path / "absent.db", "ledger_events")
    assert not (tmp_path / "absent.db").exists()
    with contextledger.open_ledger(f"sqlite:///{tmp_path / 'x.db'}"):
        pass
    waiter = sqlite_waiter(tmp_path / "x.db", "no_such_table")
    try:
        with pytest.raises(StoreError, match="no such table"):
            waiter.wait(0, 0.1)
    finally:
        waiter.close()


# -- PostgreSQL: LISTEN/NOTIFY ---------------------------------------------------------------------
# Every ledger of a database NOTIFYs the same channel name, whatever its schema; these tests use an
# events table of their own, hence a channel of their own, so other tests' appends cannot reach them.


@pytest.fixture
def pg_store(pg_url: str) -> Iterator[RecorderEventStore]:
    """A PostgreSQL store whose events table (and so its NOTIFY channel) no other test uses."""
    kwargs, schema, _ = connection_settings(pg_url)
    datastore = PostgresDatastore(
        kwargs["dbname"], kwargs["host"], kwargs["port"], kwargs["user"], kwargs["password"] or "",
        schema=schema, originator_id_type="text",
    )  # fmt: skip
    recorder = PostgresRecorder(datastore, events_table_name=f"w{uuid.uuid4().hex[:10]}_events")
    recorder.create_table()
    store = RecorderEventStore(recorder, url=pg_url, on_close=datastore.close)
    yield store
    store.close()


def channel_of(store: RecorderEventStore) -> str:
    """The recorder's NOTIFY channel."""
    assert isinstance(store.recorder, PostgresRecorder)
    return str(store.recorder.channel_name)


def start(store: RecorderEventStore, session_id: str) -> None:
    """Append one event to a new stream."""
    store.append(session_id, 0, [SessionStarted(session_id=session_id)])


def test_the_insert_path_notifies_the_recorders_channel(pg_store, pg_url):
    """An append sends NOTIFY on ``channel_name`` at commit (what a LISTENing tail waits for)."""
    channel = channel_of(pg_store)
    with psycopg.connect(pg_url.split("?")[0], autocommit=True) as listener:
        for statement in listen_statements(channel):
            listener.execute(statement)
        start(pg_store, "s1")
        received = list(listener.notifies(timeout=LONG, stop_after=1))
    assert [n.channel for n in received] == [channel]


HEARD_NONE = 0.3
"""Past a NOTIFY's interval (0.05 s) and round trip: a listener that heard nothing by then gets none."""


def test_writers_notify_only_while_a_listener_holds_its_lock(pg_store, pg_url, monkeypatch):
    """No listener, no NOTIFY (ADR 0079): a bare LISTEN hears appends only while a waiter is open.

    The waiter's connection holds the listeners' lock. Before it opened, and once its server session is
    killed (the lock dies with it), appends are committed and no NOTIFY is sent. A writer that found no
    listener stays quiet for ``QUIET`` seconds: the waiter opened meanwhile still sees the append made then,
    by looking for itself; the writer's appends after the quiet are announced.
    """
    quiet = 3.0  # long enough for the steps between the first append and the second on a loaded machine
    monkeypatch.setattr(postgres_notify, "QUIET", quiet)
    monkeypatch.setattr(notification_waiters, "UNHEARD", 2 * quiet)
    assert isinstance(pg_store.recorder, PostgresRecorder)
    notifier = pg_store.recorder.notifier
    channel = channel_of(pg_store)
    with psycopg.connect(pg_url.split("?")[0], autocommit=True) as bare:
        bare.execute(SQL("LISTEN {}").format(Identifier(channel)))
        start(pg_store, "s1")
        deadline = time.monotonic() + LONG
        while notifier.sent < 1 and time.monotonic() < deadline:  # its try found no listener: quiet from now
            time.sleep(0.01)
        assert list(bare.notifies(timeout=HEARD_NONE)) == []
        waiter = notification_waiter(pg_store)
        assert isinstance(waiter, PostgresNotificationWaiter)
        try:
            assert waiter.wait(0, LONG) is True
            thread, result = wait_in_thread(waiter, 1, LONG)
            start(pg_store, "s2")  # the writer is still quiet: no NOTIFY, the waiter looks for itself
            thread.join(2 * LONG)
            assert result == [True]
            assert list(bare.notifies(timeout=HEARD_NONE)) == []
            time.sleep(quiet)  # the writer's quiet ends: its next append looks again and finds the waiter
            start(pg_store, "s3")
            assert [n.channel for n in bare.notifies(timeout=LONG, stop_after=1)] == [channel]
            assert waiter.wait(2, LONG) is True
            with psycopg.connect(pg_url.split("?")[0], autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (waiter.backend_pid,))
            list(bare.notifies(timeout=HEARD_NONE))  # what the kill left on the way
            start(pg_store, "s4")
            assert list(bare.notifies(timeout=HEARD_NONE)) == []
            assert waiter.wait(3, LONG) is True  # reopened: it LISTENs, holds the lock and looks by itself
        finally:
            waiter.close()


def test_the_waiter_listens_a_bare_notify_reaches_it_but_only_a_row_ends_the_wait(pg_store, pg_url):
    """A NOTIFY with no new row is received (LISTEN is on) and checked; the wait still times out."""
    waiter = notification_waiter(pg_store)
    assert isinstance(waiter, PostgresNotificationWaiter)
    try:
        with psycopg.connect(pg_url.split("?")[0], autocommit=True) as other:
            other.execute(SQL("NOTIFY {}").format(Identifier(channel_of(pg_store))))
        assert waiter.wait(0, 2.0) is False
        assert waiter.notifies_received == 1
        start(pg_store, "s1")
        assert waiter.wait(0, LONG) is True
    finally:
        waiter.close()


def test_a_notify_wakes_a_wait_blocked_in_another_thread(pg_store):
    """The PostgreSQL waiter does not poll: once it blocks, only the append's NOTIFY can end it with True."""
    waiter = notification_waiter(pg_store)
    assert isinstance(waiter, PostgresNotificationWaiter)
    try:
        thread, result = wait_in_thread(waiter, 0, LONG)
        start(pg_store, "s1")
        thread.join(2 * LONG)
        assert result == [True]
    finally:
        waiter.close()


def test_a_broken_listening_connection_is_reopened(pg_store, pg_url):
    """The server ends the listening session: the next wait reopens it, LISTENs again and still wakes."""
    waiter = notification_waiter(pg_store)
    assert isinstance(waiter, PostgresNotificationWaiter)
    try:
        dead = waiter.backend_pid
        with psycopg.connect(pg_url.split("?")[0], autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (dead,))
        start(pg_store, "s1")
        assert waiter.wait(0, LONG) is True
        assert waiter.backend_pid != dead
        thread, result = wait_in_thread(waiter, 1, LONG)
        start(pg_store, "s2")
        thread.join(2 * LONG)
        assert result == [True]
    finally:
        waiter.close()


def test_a_wait_that_fails_again_after_reopening_raises_store_error(pg_store, pg_url):
    """The events table is gone: the wait reopens once, fails again and raises StoreError (no hang)."""
    waiter = notification_waiter(pg_store)
    assert isinstance(pg_store.recorder, PostgresRecorder)
    try:
        with psycopg.connect(pg_url.split("?")[0], autocommit=True) as admin:
            admin.execute(SQL("DROP TABLE {}").format(pg_store.recorder.events))
        with pytest.raises(StoreError, match="does not exist"):
            waiter.wait(0, LONG)
    finally:
        waiter.close()


def test_an_unreachable_server_is_store_unavailable():
    """Nothing listens on the port: opening the waiter raises StoreUnavailableError, at once."""
    url = "postgresql://postgres@127.0.0.1:1/test?connect_timeout=2"
    with pytest.raises(StoreUnavailableError, match="listening connection"):
        PostgresNotificationWaiter(url, channel="c", newest=SQL("SELECT 1").format())
