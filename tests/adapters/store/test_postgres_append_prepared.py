"""ADR 0047: the one-event append sent through libpq stores what psycopg's cursor statement stores."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import contextledger
import psycopg
import pytest
from contextledger.adapters.store.postgres import PostgresRecorder
from contextledger.adapters.store.postgres_append import OneEventAppend
from contextledger.adapters.store.postgres_horizon import append_statement
from contextledger.domain.errors import ConcurrencyConflictError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import PG_BASE

TABLE = "contextledger_events"


def _schema(pg_url: str) -> str:
    return pg_url.partition("?schema=")[2]


@contextmanager
def _ledger_schema(pg_url: str) -> Iterator[str]:
    with contextledger.open_ledger(pg_url):
        pass  # creates the schema, its table and its append function
    yield _schema(pg_url)


def _rows(conn: psycopg.Connection[Any], schema: str, stream: str) -> list[tuple[Any, ...]]:
    return conn.execute(
        f"SELECT originator_version, topic, state, tx_id <> '0' FROM \"{schema}\".{TABLE} "
        "WHERE originator_id = %s ORDER BY originator_version",
        (stream,),
    ).fetchall()


_streams = st.text(
    st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), min_size=1, max_size=12
)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    stream=_streams,
    topic=st.text(
        st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), min_size=1, max_size=40
    ),
    states=st.lists(st.binary(max_size=64), min_size=1, max_size=3),
)
def test_the_prepared_append_stores_what_the_cursor_statement_stores(
    pg_url: str, stream: str, topic: str, states: list[bytes]
) -> None:
    """Same rows (versions, topic, state bytes, a transaction id) and consecutive notification ids."""
    with _ledger_schema(pg_url) as schema, psycopg.connect(PG_BASE.split("?")[0], autocommit=True) as conn:
        prepared = OneEventAppend(schema, TABLE)
        cursor_statement = append_statement(schema, TABLE, one=True)
        delete = f'DELETE FROM "{schema}".{TABLE} WHERE originator_id IN (%s, %s)'
        conn.execute(delete, ("a" + stream, "b" + stream))
        for version, state in enumerate(states, start=1):
            ids = prepared.run(conn, "a" + stream, version, topic, state)
            row = conn.execute(cursor_statement, ("b" + stream, version, topic, state)).fetchone()
            assert row is not None
            assert len(ids) == 1
            assert list(row[0]) == [ids[0] + 1]  # drawn right after, from the same sequence
        assert _rows(conn, schema, "a" + stream) == _rows(conn, schema, "b" + stream)
        assert [r[2] for r in _rows(conn, schema, "a" + stream)] == states


def test_a_gap_raises_a_unique_violation_and_stores_nothing(pg_url: str) -> None:
    """The function's gap check arrives as psycopg's ``UniqueViolation`` (an ``IntegrityError``)."""
    with _ledger_schema(pg_url) as schema, psycopg.connect(PG_BASE.split("?")[0], autocommit=True) as conn:
        prepared = OneEventAppend(schema, TABLE)
        prepared.run(conn, "s", 1, "t", b"one")
        with pytest.raises(psycopg.errors.UniqueViolation, match="would leave a gap"):
            prepared.run(conn, "s", 3, "t", b"three")
        with pytest.raises(psycopg.errors.UniqueViolation):
            prepared.run(conn, "s", 1, "t", b"again")
        assert prepared.run(conn, "s", 2, "t", b"two")  # the connection is still usable
        assert [r[0] for r in _rows(conn, schema, "s")] == [1, 2]


def test_each_connection_prepares_the_statement_once(pg_url: str) -> None:
    """A new connection (a pool's, a reconnect) gets the statement prepared before its first run."""
    with _ledger_schema(pg_url) as schema:
        prepared = OneEventAppend(schema, TABLE)
        for version in (1, 2):
            with psycopg.connect(PG_BASE.split("?")[0], autocommit=True) as conn:
                prepared.run(conn, "s", version, "t", b"x")
                prepared.run(conn, "u", version, "t", b"x")
                names = conn.execute("SELECT name FROM pg_prepared_statements").fetchall()
                assert [n for (n,) in names if n.startswith("contextledger_append_")] == [
                    prepared.name.decode()
                ]


def test_a_statement_deallocated_on_the_connection_is_prepared_again(pg_url: str) -> None:
    """Psycopg sends DEALLOCATE ALL after a ROLLBACK, DROP or ALTER: the next append prepares and lands."""
    with _ledger_schema(pg_url) as schema, psycopg.connect(PG_BASE.split("?")[0], autocommit=True) as conn:
        prepared = OneEventAppend(schema, TABLE)
        prepared.run(conn, "s", 1, "t", b"one")
        conn.execute("DEALLOCATE ALL")
        assert prepared.run(conn, "s", 2, "t", b"two")
        with pytest.raises(psycopg.errors.UniqueViolation):  # a real error is still raised, once
            prepared.run(conn, "s", 2, "t", b"again")
        assert [r[0] for r in _rows(conn, schema, "s")] == [1, 2]


def test_a_stale_cached_append_through_the_ledger_is_a_conflict(pg_url: str) -> None:
    """Two ledgers on one session: the stale one's append conflicts, then takes the turn and lands."""
    with contextledger.open_ledger(pg_url) as one, contextledger.open_ledger(pg_url) as two:
        session = one.start_session(session_id="s")
        two.version(session)  # caches the state at version 1
        one.add_user_message(session, "from one")
        assert two.add_user_message(session, "from two") == 3  # conflicted, re-read, appended
        with pytest.raises(ConcurrencyConflictError):
            two.add_user_message(session, "stale", expected_version=1)
        assert isinstance(_recorder(two), PostgresRecorder)


def _recorder(ledger: Any) -> Any:
    log = ledger.log
    while not hasattr(log, "recorder"):
        log = log.inner
    return log.recorder
