"""A SQLite projection commit writes in a handful of statements, whatever it holds (ADR 0073)."""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import pytest
from contextledger.adapters.store.factory import open_store
from contextledger.adapters.store.projections import RecorderProjections
from contextledger.adapters.store.sqlite_commit import ROWS_PER_INSERT, rows_per_insert
from contextledger.domain.errors import StoreError
from contextledger.domain.ports import ProjectionCommit
from eventsourcing.sqlite import SQLiteConnection


def test_rows_per_insert_follows_the_connections_limit_of_bound_values():
    """Four values a row: a connection binding 41 values takes 10 rows a statement; a generous one the cap."""
    conn = sqlite3.connect(":memory:")
    try:
        assert rows_per_insert(conn.cursor()) == min(
            ROWS_PER_INSERT, conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // 4
        )
        conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 41)
        assert rows_per_insert(conn.cursor()) == 10
    finally:
        conn.close()


def test_a_batch_commit_of_several_views_runs_three_statements_in_its_transaction(
    tmp_path, sqlite_statements
):
    """Checkpoints, every view's rows and the lease renewal: one statement each, and every row lands."""
    store = open_store(f"sqlite:///{tmp_path / 'ledger.db'}")
    try:
        views = RecorderProjections(store)
        lease = views.acquire("ctx")
        rows = {f"s{i:03d}": (i, bytes([i % 256]) * 40) for i in range(300)}
        digests = {f"s{i:03d}": (i, b"digest") for i in range(300)}
        with sqlite_statements.recording() as executed:
            views.commit_many(
                [
                    ProjectionCommit("ctx", "ctx", 12, rows),
                    ProjectionCommit("ctx#renders", "", 12, digests),
                    ProjectionCommit("tokens", "", 12, {}),
                ]
            )
        with sqlite3.connect(":memory:") as probe:  # one statement on SQLite >= 3.32, three on an older one
            inserts = math.ceil(600 / rows_per_insert(probe.cursor()))
        assert [" ".join(sql.rstrip(";").split()[:3]) for sql in executed] == [
            "PRAGMA synchronous=NORMAL",
            "BEGIN IMMEDIATE",
            "INSERT INTO ledger_projection_tracking",
            *["INSERT OR REPLACE"] * inserts,
            "UPDATE ledger_projection_leases SET",
            "COMMIT",
            "PRAGMA synchronous=FULL",
        ]
        assert views.load_rows("ctx", list(rows)) == rows
        assert views.load_rows("ctx#renders", list(digests)) == digests
        assert views.load_tracking("ctx") == 12
        lease.release()
    finally:
        store.close()


def test_a_commit_renews_the_leases_its_owner_holds_on_the_checkpoints_it_moves(tmp_path):
    """Of the leases, only the committing owner's on the checkpoints it moves get a later expiry."""
    store = open_store(f"sqlite:///{tmp_path / 'ledger.db'}")
    try:
        mine, theirs = RecorderProjections(store), RecorderProjections(store)
        held = [mine.acquire("ctx"), mine.acquire("idle"), theirs.acquire("elsewhere")]
        with store.recorder.datastore.transaction(commit=True) as c:
            c.execute("UPDATE ledger_projection_leases SET expires = 1000.0")  # long expired
        mine.commit_many(
            [ProjectionCommit("ctx", "ctx", 3, {}), ProjectionCommit("elsewhere", "elsewhere", 3, {})]
        )
        expires = {lease.projection: lease.expires for lease in mine.leases()}
        assert expires["ctx"] is not None
        assert expires["ctx"] > datetime.now(UTC)
        assert expires["idle"] == expires["elsewhere"] == datetime.fromtimestamp(1000.0, UTC)
        for lease in held:
            lease.release()
    finally:
        store.close()


def test_a_connection_handed_over_inside_a_transaction_is_refused_and_its_write_never_committed(
    tmp_path, monkeypatch
):
    """``executescript`` would commit a transaction left open: the write refuses it as ``BEGIN`` does."""
    path = tmp_path / "ledger.db"
    store = open_store(f"sqlite:///{path}")
    try:
        left_open = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        left_open.execute("BEGIN")
        left_open.execute("INSERT INTO ledger_projection_tracking VALUES ('half-done', 5)")

        @contextmanager
        def handed_over(*, commit: bool) -> Iterator[SQLiteConnection]:
            del commit
            yield SQLiteConnection(left_open, max_age=None)

        monkeypatch.setattr(store.recorder.datastore, "get_connection", handed_over)
        with pytest.raises(StoreError, match="within a transaction"):
            RecorderProjections(store).commit("p", 1, {"s": (1, b"row")})
        assert left_open.in_transaction  # still open: neither committed nor ended by the refused write
        left_open.rollback()
        left_open.close()
        monkeypatch.undo()
        views = RecorderProjections(store)
        assert (views.load_tracking("half-done"), views.load_tracking("p")) == (0, 0)
        assert views.load_row("p", "s") is None
    finally:
        store.close()
