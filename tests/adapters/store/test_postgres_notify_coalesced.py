"""ADR 0047: a writer's commits are announced by NOTIFYs sent after them, at most one per interval."""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
from contextledger.adapters.store import postgres_notify
from contextledger.adapters.store.event_store import RecorderEventStore
from contextledger.adapters.store.postgres import PostgresRecorder
from contextledger.adapters.store.postgres_horizon import listen_statements
from contextledger.adapters.store.postgres_notify import CommitNotifier
from contextledger.adapters.store.postgres_options import connection_settings
from contextledger.domain.content import InlineText
from contextledger.domain.events import SessionStarted, UserMessageAdded
from eventsourcing.postgres import PostgresDatastore
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import PG_BASE

LONG = 30.0


class Sends:
    """A fake ``send``: notes when each NOTIFY started; can be told to fail, or that nobody listens."""

    def __init__(self) -> None:
        self.started: list[float] = []
        self.fail = False
        self.heard = True
        self.lock = threading.Lock()

    def __call__(self) -> bool:
        with self.lock:
            self.started.append(time.monotonic())
        if self.fail:
            msg = "server gone"
            raise psycopg.OperationalError(msg)
        return self.heard

    def wait_for(self, count: int, timeout: float = LONG) -> None:
        deadline = time.monotonic() + timeout
        while len(self.started) < count and time.monotonic() < deadline:
            time.sleep(0.001)


@settings(max_examples=15, deadline=None)
@given(gaps=st.lists(st.sampled_from([0.0, 0.0, 0.001, 0.004, 0.012, 0.03]), min_size=1, max_size=25))
def test_every_commit_is_followed_by_a_notify_started_after_it(gaps: list[float]) -> None:
    """Whatever the pace of commits, each one is followed by a NOTIFY that started after it, soon."""
    sends = Sends()
    notifier = CommitNotifier(sends, interval=0.01)
    commits = []
    for gap in gaps:
        time.sleep(gap)
        commits.append(time.monotonic())  # the commit happened before ``committed`` is called
        notifier.committed()
    time.sleep(0.3)
    notifier.close()
    for at in commits:
        after = [s for s in sends.started if s >= at]
        assert after, "a commit was never followed by a NOTIFY"
        assert min(after) - at < 0.25  # the interval plus scheduling, with room for a loaded machine
    assert len(sends.started) <= len(commits)


def test_a_burst_of_commits_is_announced_by_one_notify_per_interval() -> None:
    """Commits made faster than the interval share NOTIFYs: the first at once, then one per interval."""
    sends = Sends()
    notifier = CommitNotifier(sends, interval=0.05)
    start = time.monotonic()
    notifier.committed()
    sends.wait_for(1)
    assert sends.started[0] - start < 0.05  # the first commit after a quiet interval: at once
    while time.monotonic() - start < 0.3:
        notifier.committed()
        time.sleep(0.0005)
    took = time.monotonic() - start
    notifier.close()
    assert 2 <= len(sends.started) <= took / 0.05 + 2
    by_thread = sends.started[:-1]  # the last one may be close's, sent at once
    assert all(b - a >= 0.04 for a, b in itertools.pairwise(by_thread))
    assert notifier.sent == len(sends.started)


def test_close_sends_what_is_due_and_later_commits_notify_at_once() -> None:
    """A commit waiting for its interval is announced by ``close``; after it, each commit notifies itself."""
    sends = Sends()
    notifier = CommitNotifier(sends, interval=60.0)
    notifier.committed()
    sends.wait_for(1)
    notifier.committed()  # due in a minute
    time.sleep(0.05)
    assert len(sends.started) == 1
    notifier.close()
    assert len(sends.started) == 2
    notifier.committed()
    assert len(sends.started) == 3  # no thread after close: sent in the caller's thread


def test_commits_racing_with_close_are_each_followed_by_a_notify() -> None:
    """Writers that commit while the store closes: every commit still has a NOTIFY started after it."""
    for _ in range(20):
        sends = Sends()
        notifier = CommitNotifier(sends, interval=0.002)
        commits: list[float] = []

        def write(notifier: CommitNotifier = notifier, commits: list[float] = commits) -> None:
            for _ in range(200):
                commits.append(time.monotonic())
                notifier.committed()

        writer = threading.Thread(target=write)
        writer.start()
        time.sleep(0.001)
        notifier.close()
        writer.join()
        last = max(commits)
        assert any(s >= last for s in sends.started)


def test_a_failed_notify_is_dropped_and_the_next_commit_notifies_again() -> None:
    """A NOTIFY that fails is logged, not raised to the writer; the notifier keeps working."""
    sends = Sends()
    sends.fail = True
    notifier = CommitNotifier(sends, interval=0.001)
    notifier.committed()
    sends.wait_for(1)
    sends.fail = False
    time.sleep(0.01)
    notifier.committed()
    sends.wait_for(2)
    notifier.close()
    assert len(sends.started) == 2
    assert notifier.sent == 1


def test_the_thread_ends_when_idle_and_the_next_commit_starts_another(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No thread lingers without commits (an unclosed ledger leaks none); the next commit still notifies."""
    monkeypatch.setattr(postgres_notify, "_IDLE", 0.05)
    sends = Sends()
    notifier = CommitNotifier(sends, interval=0.001)
    notifier.committed()
    sends.wait_for(1)
    deadline = time.monotonic() + LONG
    while notifier._thread is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert notifier._thread is None
    notifier.committed()
    sends.wait_for(2)
    notifier.close()
    assert len(sends.started) == 2


def test_after_a_notify_nobody_heard_commits_send_nothing_for_a_moment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No listener, no round trip (ADR 0079): for ``QUIET`` seconds commits send nothing, then look again."""
    monkeypatch.setattr(postgres_notify, "QUIET", 0.5)
    sends = Sends()
    sends.heard = False
    notifier = CommitNotifier(sends, interval=0.001)
    notifier.committed()
    sends.wait_for(1)
    found_none = time.monotonic()
    while time.monotonic() - found_none < 0.3:
        notifier.committed()
        time.sleep(0.001)
    assert len(sends.started) == 1  # quiet: nobody listened a moment ago
    time.sleep(0.3)
    sends.heard = True
    notifier.committed()  # the quiet is over: this commit looks again, and a listener hears it
    sends.wait_for(2)
    notifier.committed()
    sends.wait_for(3)
    notifier.close()
    assert len(sends.started) == 3
    assert notifier.sent == 3


# -- on PostgreSQL ---------------------------------------------------------------------------------
# Every ledger of a database NOTIFYs one channel name per events table: these tests use a table (so a
# channel) of their own, so that other tests' appends cannot reach their listeners.


@contextmanager
def _store(pg_url: str, interval: float) -> Iterator[RecorderEventStore]:
    kwargs, schema, _ = connection_settings(pg_url)
    datastore = PostgresDatastore(
        kwargs["dbname"], kwargs["host"], kwargs["port"], kwargs["user"], kwargs["password"] or "",
        schema=schema, originator_id_type="text",
    )  # fmt: skip
    table = f"n{uuid.uuid4().hex[:10]}_events"
    recorder = PostgresRecorder(datastore, events_table_name=table, notify_interval=interval)
    recorder.create_table()

    def close() -> None:
        recorder.close()
        datastore.close()

    store = RecorderEventStore(recorder, url=pg_url, on_close=close)
    try:
        yield store
    finally:
        store.close()


def _listen(store: RecorderEventStore) -> psycopg.Connection[tuple[object, ...]]:
    assert isinstance(store.recorder, PostgresRecorder)
    conn = psycopg.connect(PG_BASE.split("?")[0], autocommit=True)
    for statement in listen_statements(str(store.recorder.channel_name)):
        conn.execute(statement)
    return conn


def _received(listener: psycopg.Connection[tuple[object, ...]], timeout: float) -> int:
    return sum(1 for _ in listener.notifies(timeout=timeout, stop_after=1))


def _say(store: RecorderEventStore, position: int) -> None:
    """Append one user message at ``position`` of stream ``s``."""
    store.append("s", position - 1, [UserMessageAdded(content=InlineText(f"m{position}"))])


def _positions(store: RecorderEventStore) -> list[int]:
    return [n.originator_version for n in store.recorder.select_notifications(1, 1000)]


def test_a_second_append_within_the_interval_is_announced_at_its_end(pg_url: str) -> None:
    """The first append notifies at once; one right after it is announced when the interval ends."""
    with _store(pg_url, 2.0) as store:
        store.append("s", 0, [SessionStarted(session_id="s")])
        time.sleep(2.1)  # the start's NOTIFY went out; the next append opens a new interval
        with _listen(store) as listener:
            _say(store, 2)
            assert _received(listener, LONG) == 1
            _say(store, 3)
            assert _received(listener, 0.5) == 0  # coalesced: not yet
            assert _received(listener, LONG) == 1
            assert _positions(store) == [1, 2, 3]  # woken after the commit: the event is there


def test_closing_the_store_announces_the_commits_still_due(pg_url: str) -> None:
    """A commit waiting for its interval is announced when the store closes, not lost with the process."""
    with _store(pg_url, 60.0) as store, _listen(store) as listener:
        store.append("s", 0, [SessionStarted(session_id="s")])
        assert _received(listener, LONG) == 1
        _say(store, 2)  # due in a minute
        assert _received(listener, 0.3) == 0
        store.close()
        assert _received(listener, LONG) == 1


def test_many_appends_reach_a_listener_with_fewer_notifies(pg_url: str) -> None:
    """A burst of appends wakes listeners by fewer NOTIFYs than appends; the last follows every commit."""
    with _store(pg_url, 0.05) as store, _listen(store) as listener:
        start = time.monotonic()
        store.append("s", 0, [SessionStarted(session_id="s")])
        for position in range(2, 62):
            _say(store, position)
        took = time.monotonic() - start
        notifies = 0
        while _received(listener, 1.0):
            notifies += 1
        assert 1 <= notifies <= took / 0.05 + 3
        assert _positions(store) == list(range(1, 62))
