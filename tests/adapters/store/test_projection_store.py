"""The NotificationReader and ProjectionStore contract, run against memory, SQLite and PostgreSQL."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import psycopg
import pytest
from contextledger.adapters.store.event_store import RecorderEventStore
from contextledger.adapters.store.factory import open_store
from contextledger.adapters.store.postgres import SCHEMA_VERSION
from contextledger.adapters.store.projections import RecorderProjections
from contextledger.adapters.store.sqlite_commit import ROWS_PER_INSERT
from contextledger.domain.content import InlineText
from contextledger.domain.errors import ConcurrencyConflictError, ProjectionLockedError, StoreError
from contextledger.domain.events import SessionStarted, UserMessageAdded
from contextledger.domain.ports import ProjectionCommit
from contextledger.testing import FixedClock


def _started(session_id: str) -> SessionStarted:
    return SessionStarted(session_id=session_id, at=FixedClock().now(), model="m")


def _user(text: str) -> UserMessageAdded:
    return UserMessageAdded(content=InlineText(text), at=FixedClock().now())


@pytest.fixture
def store(any_url: str) -> Iterator[RecorderEventStore]:
    """An opened store on each backend."""
    opened = open_store(any_url)
    yield opened
    opened.close()


def test_notifications_cover_every_stream_in_store_order(store):
    """Notifications interleave streams in append order with their positions; ``after`` and ``limit`` page."""
    store.append("a", 0, [_started("a")])
    store.append("b", 0, [_started("b")])
    store.append("a", 1, [_user("x"), _user("y")])
    reader = RecorderProjections(store)
    found = reader.read_notifications(0, 10)
    assert [(n.stream_id, n.position) for n in found] == [("a", 1), ("b", 1), ("a", 2), ("a", 3)]
    assert [n.id for n in found] == sorted(n.id for n in found)
    assert isinstance(found[2].event, UserMessageAdded)
    assert found[2].event.content.text == "x"
    page = reader.read_notifications(found[1].id, 1)
    assert [(n.stream_id, n.position) for n in page] == [("a", 2)]
    assert reader.read_notifications(found[-1].id, 10) == []


def test_rows_and_tracking_commit_together_and_never_move_back(store):
    """A commit stores rows and tracking at once; a commit behind the tracking is refused, writing nothing."""
    views = RecorderProjections(store)
    assert views.load_tracking("p") == 0
    views.commit("p", 5, {"s1": (3, b"one"), "s2": (1, b"two")})
    views.commit("p", 9, {"s1": (4, b"one-b")})
    assert views.load_tracking("p") == 9
    assert views.load_row("p", "s1") == (4, b"one-b")
    assert views.load_row("p", "s2") == (1, b"two")
    assert views.load_row("p", "s3") is None
    assert views.row_keys("p") == ["s1", "s2"]
    with pytest.raises(StoreError, match="move it back"):
        views.commit("p", 8, {"s3": (1, b"late")})
    assert views.load_row("p", "s3") is None
    assert views.load_tracking("p") == 9
    assert views.load_tracking("other") == 0
    assert views.row_keys("other") == []


def test_a_commit_of_many_rows_writes_each_once_and_a_later_commit_of_a_key_wins(store):
    """More rows than one SQLite INSERT holds (ROWS_PER_INSERT) land; a key written twice keeps the last."""
    views = RecorderProjections(store)
    many = {f"k{i:04d}": (i, bytes([i % 256]) * (i % 7)) for i in range(2 * ROWS_PER_INSERT + 1)}
    views.commit_many(
        [
            ProjectionCommit("p", "p", 3, many),
            ProjectionCommit("p", "", 3, {"k0005": (99, b"later"), "extra": (1, b"")}),
            ProjectionCommit("q", "", 3, {"k0005": (7, b"other view")}),
        ]
    )
    assert views.row_keys("p") == sorted([*many, "extra"])
    assert views.load_rows("p", list(many)) == {**many, "k0005": (99, b"later")}
    assert views.load_row("p", "extra") == (1, b"")
    assert views.load_row("q", "k0005") == (7, b"other view")
    assert views.load_tracking("p") == 3


def test_a_commit_with_one_checkpoint_behind_names_it_and_writes_nothing(store):
    """Of two checkpoints committed together, the one that would move back is named; nothing lands."""
    views = RecorderProjections(store)
    views.commit_many([ProjectionCommit("a", "a", 5, {"s": (1, b"a5")}), ProjectionCommit("b", "b", 9, {})])
    with pytest.raises(StoreError, match=r"projection 'b' is at 9; a commit at 8 would move it back"):
        views.commit_many(
            [
                ProjectionCommit("a", "a", 7, {"s": (2, b"a7"), "t": (2, b"new")}),
                ProjectionCommit("b", "b", 8, {"s": (3, b"b8")}),
            ]
        )
    assert (views.load_tracking("a"), views.load_tracking("b")) == (5, 9)
    assert views.load_rows("a", ["s", "t"]) == {"s": (1, b"a5")}
    assert views.load_rows("b", ["s"]) == {}
    views.commit_many([ProjectionCommit("a", "a", 7, {"t": (2, b"new")}), ProjectionCommit("b", "b", 9, {})])
    assert (views.load_tracking("a"), views.load_tracking("b")) == (7, 9)
    assert views.load_row("a", "t") == (2, b"new")
    # named at the position committed, not at one a later checkpoint of the same commit would have set
    with pytest.raises(StoreError, match=r"projection 'a' is at 7; a commit at 6 would move it back"):
        views.commit_many([ProjectionCommit("a", "a", 6, {}), ProjectionCommit("a", "a", 8, {})])
    with pytest.raises(StoreError, match=r"projection 'new' is at 0; a commit at -1 would move it back"):
        views.commit_many([ProjectionCommit("new", "new", -1, {})])
    assert (views.load_tracking("a"), views.load_tracking("new")) == (7, 0)


def test_drop_removes_one_version_and_the_registry_switches_atomically(store):
    """Dropping a version leaves the others; ``activate`` replaces the active version of a name."""
    views = RecorderProjections(store)
    views.commit("v1", 2, {"s": (1, b"a")})
    views.commit("v2", 2, {"s": (1, b"b")})
    assert views.active("context") is None
    views.activate("context", "v1")
    assert views.active("context") == "v1"
    views.activate("context", "v2")
    assert views.active("context") == "v2"
    views.drop("v1")
    assert views.load_tracking("v1") == 0
    assert views.row_keys("v1") == []
    assert views.load_row("v2", "s") == (1, b"b")


def test_one_runner_holds_a_projection_lease(store, any_url):
    """A second runner is refused with ProjectionLockedError until the first releases its lease."""
    first = RecorderProjections(store)
    other_store = store if any_url == "memory://" else open_store(any_url)
    try:
        second = RecorderProjections(other_store)
        lease = first.acquire("p")
        first.renew("p")
        with pytest.raises(ProjectionLockedError, match="'p'"):
            second.acquire("p")
        second.acquire("q").release()  # other projections are free
        lease.release()
        lease.release()
        second.acquire("p").release()
    finally:
        if other_store is not store:
            other_store.close()


def test_leases_asked_for_by_name_are_those_listed(store, any_url):
    """``leases(names)`` lists the leases of those names only, held by another runner as by this one."""
    first = RecorderProjections(store)
    other_store = store if any_url == "memory://" else open_store(any_url)
    try:
        second = RecorderProjections(other_store)
        held = [first.acquire("p"), first.acquire("q")]
        assert [(lease.projection, lease.alive) for lease in second.leases(["p", "r"])] == [("p", True)]
        assert second.leases(["r"]) == []
        assert [lease.projection for lease in first.leases(["q"])] == ["q"]
        for lease in held:
            lease.release()
        assert second.leases(["p", "q"]) == []
    finally:
        if other_store is not store:
            other_store.close()


def test_a_dead_holder_does_not_keep_a_sqlite_lease(sqlite_url):
    """A lease whose holder process died (kill -9) is taken over without waiting for its expiry."""
    code = (
        "import os,sys;from contextledger.adapters.store.factory import open_store;"
        "from contextledger.adapters.store.projections import RecorderProjections;"
        f"RecorderProjections(open_store({sqlite_url!r})).acquire('p');os._exit(0)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    store = open_store(sqlite_url)
    try:
        RecorderProjections(store).acquire("p").release()
    finally:
        store.close()


def test_rolled_back_ids_leave_a_gap_that_readers_skip(pg_url):
    """PostgreSQL consumes a notification id in a rolled-back insert; the reader skips the gap."""
    store = open_store(pg_url)
    try:
        store.append("a", 0, [_started("a")])
        schema = pg_url.partition("schema=")[2]
        with psycopg.connect(pg_url.split("?")[0]) as conn:
            conn.execute(  # an append through the one write path (ADR 0031), then rolled back
                f'SELECT "{schema}".contextledger_events_append(%s::text[], %s::bigint[], %s::text[], '
                "%s::bytea[], '{}', '{}', '{}', '{}', '{}', '{}')",
                (["z"], [1], ["t"], [b"\x00"]),
            )
            conn.rollback()
        store.append("a", 1, [_user("after the gap")])
        reader = RecorderProjections(store)
        found = reader.read_notifications(0, 10)
        assert [n.position for n in found] == [1, 2]
        assert found[1].id - found[0].id == 2  # the rolled-back id is a hole
        assert reader.read_notifications(found[0].id, 10)[0].id == found[1].id
    finally:
        store.close()


def test_a_schema_2_postgres_ledger_gains_the_projection_tables(pg_url):
    """Opening a schema written at version 2 migrates it to the current version with projection tables."""
    open_store(pg_url).close()
    schema = pg_url.partition("schema=")[2]
    with psycopg.connect(pg_url.split("?")[0], autocommit=True) as conn:
        for table in ("projection_rows", "projection_tracking", "projection_active"):
            conn.execute(f'DROP TABLE "{schema}".contextledger_{table}')
        conn.execute(f"UPDATE \"{schema}\".contextledger_meta SET value = 2 WHERE key = 'schema'")
    store = open_store(pg_url)
    try:
        RecorderProjections(store).commit("p", 1, {"s": (1, b"x")})
        with psycopg.connect(pg_url.split("?")[0]) as conn:
            row = conn.execute(
                f"SELECT value FROM \"{schema}\".contextledger_meta WHERE key = 'schema'"
            ).fetchone()
        assert row == (SCHEMA_VERSION,)
        assert SCHEMA_VERSION == 8  # schema 8: session starts alone are indexed by topic (ADR 0077)
    finally:
        store.close()


def test_a_schema_3_postgres_ledger_gets_byte_ordered_row_keys(pg_url):
    """Schema 3 row keys followed the database collation; schema 4 compares them byte-wise, index and all."""
    open_store(pg_url).close()
    schema = pg_url.partition("schema=")[2]
    with psycopg.connect(pg_url.split("?")[0], autocommit=True) as conn:
        conn.execute(
            f'ALTER TABLE "{schema}".contextledger_projection_rows '
            'ALTER COLUMN key TYPE text COLLATE "default"'
        )
        conn.execute(f"UPDATE \"{schema}\".contextledger_meta SET value = 3 WHERE key = 'schema'")
    store = open_store(pg_url)
    try:
        views = RecorderProjections(store)
        views.commit("p", 1, {"s/a": (1, b"1"), "s0": (1, b"2"), "s/\U0001f600": (1, b"3"), "t": (1, b"4")})
        assert sorted(views.load_range("p", "s/", "s0")) == ["s/a", "s/\U0001f600", "s0"]
        with psycopg.connect(pg_url.split("?")[0]) as conn:
            collation = conn.execute(
                "SELECT collation_name FROM information_schema.columns WHERE table_schema = %s "
                "AND table_name = 'contextledger_projection_rows' AND column_name = 'key'",
                (schema,),
            ).fetchone()
        assert collation == ("C",)
    finally:
        store.close()


def test_head_is_the_newest_notification_id_and_a_refused_append_leaves_it(store):
    """``head`` is 0 on an empty store, then the id of the newest notification; a conflict adds none."""
    reader = RecorderProjections(store)
    assert reader.head() == 0
    store.append("a", 0, [_started("a")])
    store.append("b", 0, [_started("b")])
    store.append("a", 1, [_user("x")])
    newest = reader.read_notifications(0, 10)[-1].id
    assert reader.head() == newest
    with pytest.raises(ConcurrencyConflictError):
        store.append("a", 1, [_user("stale")])  # the stream is at 2: a conflict, nothing stored
    assert reader.head() == newest
