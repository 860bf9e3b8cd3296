"""ADR 0042: the append's NOTIFY follows its commit as a transaction of its own; schema 6 migrates to 7."""

from __future__ import annotations

import contextledger
import psycopg
from contextledger.adapters.store.postgres import SCHEMA_VERSION
from contextledger.adapters.store.postgres_horizon import listen_statements
from contextledger.application.rebuild.rebuild import store_views

from tests.conftest import PG_BASE

LONG = 30.0


def _schema(pg_url: str) -> str:
    return pg_url.partition("?schema=")[2]


def test_a_listener_woken_by_an_append_reads_the_appended_event(pg_url: str) -> None:
    """The NOTIFY is sent once the append has committed: what the woken listener reads holds the event.

    The listener holds its lock before the first append (a writer that found none would be quiet a moment,
    ADR 0079); the session start's NOTIFY is taken first.
    """
    with (
        psycopg.connect(PG_BASE.split("?")[0], autocommit=True) as listener,
        contextledger.open_ledger(pg_url) as ledger,
    ):
        for statement in listen_statements("contextledger_events"):
            listener.execute(statement)
        session = ledger.start_session(session_id="s")
        assert list(listener.notifies(timeout=LONG, stop_after=1))
        list(listener.notifies(timeout=0.3))
        _views, reader = store_views(ledger)
        head = reader.head()
        ledger.add_user_message(session, "hello")
        assert list(listener.notifies(timeout=LONG, stop_after=1))
        seen = reader.read_notifications(head, 10)
    assert [(n.stream_id, n.position) for n in seen] == [(session, 2)]


def test_a_schema_6_ledger_loses_its_claim_function_and_keeps_appending_in_order(pg_url: str) -> None:
    """Opening a schema-6 ledger inlines the claim in the append (the claim function is dropped)."""
    schema = _schema(pg_url)
    with contextledger.open_ledger(pg_url) as ledger:
        session = ledger.start_session(session_id="old")
        ledger.add_user_message(session, "before")
    with psycopg.connect(PG_BASE.split("?")[0], autocommit=True) as conn:
        conn.execute(
            f'CREATE FUNCTION "{schema}".contextledger_events_claim(n integer) RETURNS bigint[] '
            "LANGUAGE sql AS 'SELECT ARRAY[]::bigint[]'"
        )
        conn.execute(f"UPDATE \"{schema}\".contextledger_meta SET value = 6 WHERE key = 'schema'")
    with contextledger.open_ledger(pg_url) as ledger:
        ledger.add_user_message(session, "after")
        _views, reader = store_views(ledger)
        seen = reader.read_notifications(0, 10)
        assert [(n.stream_id, n.position) for n in seen] == [(session, 1), (session, 2), (session, 3)]
    with psycopg.connect(PG_BASE.split("?")[0], autocommit=True) as conn:
        left = conn.execute("SELECT to_regproc(%s)", (f'"{schema}".contextledger_events_claim',)).fetchone()
        version = conn.execute(
            f"SELECT value FROM \"{schema}\".contextledger_meta WHERE key = 'schema'"
        ).fetchone()
    assert left == (None,)
    assert version == (SCHEMA_VERSION,)
