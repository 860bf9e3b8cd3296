"""A SQLite projection commit writes in a handful of statements, whatever it holds (ADR 0073)."""

from __future__ import annotations

import sqlite3
from typing import Any

from contextledger.adapters.store.factory import open_store
from contextledger.adapters.store.projection_tables import ROWS_PER_INSERT, rows_per_insert
from contextledger.adapters.store.projections import RecorderProjections
from contextledger.domain.ports import ProjectionCommit


def test_rows_per_insert_follows_the_connections_limit_of_bound_values():
    """Four values a row: a connection binding 41 values takes 10 rows a statement; a generous one the cap."""
    conn = sqlite3.connect(":memory:")
    try:
        assert rows_per_insert(conn.cursor()) == min(
            ROWS_PER_INSERT, conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // 4
        )
        conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 41)
        assert rows_per_insert(conn.cursor()) == 10
        conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 3)
        assert rows_per_insert(conn.cursor()) == 1
    finally:
        conn.close()


def test_a_batch_commit_of_several_views_runs_three_statements_in_its_transaction(tmp_path, monkeypatch):
    """Checkpoints, every view's rows and the lease renewal: one statement each, and every row lands."""
    executed: list[str] = []
    tracing = [False]
    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)
        conn.set_trace_callback(lambda sql: executed.append(sql) if tracing[0] else None)
        return conn

    monkeypatch.setattr(sqlite3, "connect", traced)
    store = open_store(f"sqlite:///{tmp_path / 'ledger.db'}")
    try:
        views = RecorderProjections(store)
        lease = views.acquire("ctx")
        rows = {f"s{i:03d}": (i, bytes([i % 256]) * 40) for i in range(300)}
        digests = {f"s{i:03d}": (i, b"digest") for i in range(300)}
        tracing[0] = True
        views.commit_many(
            [
                ProjectionCommit("ctx", "ctx", 12, rows),
                ProjectionCommit("ctx#renders", "", 12, digests),
                ProjectionCommit("tokens", "", 12, {}),
            ]
        )
        tracing[0] = False
        assert [" ".join(sql.rstrip(";").split()[:3]) for sql in executed] == [
            "PRAGMA synchronous=NORMAL",
            "BEGIN IMMEDIATE",
            "INSERT INTO ledger_projection_tracking",
            "INSERT OR REPLACE",
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
