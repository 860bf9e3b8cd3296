"""ADR 0052: the single append's fast paths behave as the definitions they replace."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import contextledger
import msgspec
import psycopg
import pytest
from contextledger.adapters.store.event_store import RecorderEventStore
from contextledger.adapters.store.guards import refuse_nul, storable, translated
from contextledger.adapters.store.postgres import PostgresRecorder, _append_on
from contextledger.domain.content import InlineText
from contextledger.domain.errors import (
    ContextLedgerError,
    InvalidMessageError,
    SessionNotFoundError,
    StoreError,
    StoreUnavailableError,
)
from contextledger.domain.events import UserMessageAdded
from eventsourcing.persistence import (
    IntegrityError,
    InterfaceError,
    OperationalError,
    PersistenceError,
    StoredEvent,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.adapters.store.test_postgres_append_prepared import _rows
from tests.conftest import PG_BASE


@contextmanager
def _translated_before(action: str) -> Iterator[None]:
    """``translated`` as a generator context manager, as it was defined before ADR 0052."""
    try:
        yield
    except ContextLedgerError:
        raise
    except (OperationalError, InterfaceError) as error:
        msg = f"{action}: database unavailable: {error}"
        raise StoreUnavailableError(msg) from error
    except PersistenceError as error:
        msg = f"{action}: {error}"
        raise StoreError(msg) from error
    except OSError as error:
        msg = f"{action}: {error}"
        raise StoreUnavailableError(msg) from error
    except UnicodeEncodeError as error:
        msg = f"{action}: a text is not valid Unicode ({error.reason} at {error.start}); nothing was written"
        raise InvalidMessageError(msg) from None


@contextmanager
def _storable_before() -> Iterator[None]:
    """``storable`` as it was defined before ADR 0052."""
    try:
        yield
    except (TypeError, ValueError, msgspec.EncodeError) as error:
        msg = f"an event holds a value that cannot be stored ({error}); use text, numbers, lists, objects"
        raise InvalidMessageError(msg) from None


_ERRORS = [
    OperationalError("down"),
    InterfaceError("closed"),
    IntegrityError("gap"),
    PersistenceError("odd"),
    ConnectionResetError("reset"),
    OSError("disk"),
    UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"),
    TypeError("no"),
    ValueError("bad"),
    msgspec.EncodeError("enc"),
    KeyError("k"),
    SessionNotFoundError("s-1"),
    InvalidMessageError("mine"),
    RuntimeError("other"),
]


def _outcome(context: Any, error: BaseException | None) -> tuple[Any, ...]:
    """What leaves ``with context:`` when ``error`` (or nothing) is raised inside it."""

    def run() -> None:
        with context:
            if error is not None:
                raise error

    try:
        run()
    except BaseException as raised:  # noqa: BLE001  # compared, never swallowed
        return (
            type(raised),
            str(raised),
            raised is error,
            raised.__cause__ is error,
            raised.__suppress_context__,
        )
    return ("nothing",)


@settings(max_examples=100, deadline=None)
@given(error=st.one_of(st.none(), st.sampled_from(_ERRORS)), action=st.text(max_size=12))
def test_translated_maps_as_the_generator_did(error: BaseException | None, action: str) -> None:
    """Each error leaves ``translated`` (and ``storable``) as the same type, message, cause and context."""
    assert _outcome(translated(action), error) == _outcome(_translated_before(action), error)
    assert _outcome(storable(), error) == _outcome(_storable_before(), error)


@settings(max_examples=200, deadline=None)
@given(
    stream=st.text(st.sampled_from("ab\x00"), min_size=1, max_size=4),
    key=st.one_of(st.none(), st.text(st.sampled_from("k\x00"), max_size=3)),
)
def test_an_append_refuses_a_nul_exactly_when_refuse_nul_does(stream: str, key: str | None) -> None:
    """The store's guarded check raises what ``refuse_nul`` raises, and only then (memory backend)."""
    try:
        refuse_nul([stream], [key])
        expected = None
    except InvalidMessageError as error:
        expected = str(error)
    with contextledger.open_ledger("memory://") as ledger:
        store = ledger.ports.log
        assert isinstance(store, RecorderEventStore)
        try:
            store.append(
                stream, 0, [UserMessageAdded(content=InlineText("hi"), at=None, meta={})], idempotency_key=key
            )
            found = None
        except InvalidMessageError as error:
            found = str(error)
    assert found == expected


def test_one_event_insert_stores_what_the_general_statement_stores(pg_url: str) -> None:
    """One event's ``insert_events`` (``_insert_one``) stores the general statement's rows.

    Both refuse a gap with ``IntegrityError``; the one-event path announces its commit to the notifier.
    """
    schema = pg_url.partition("?schema=")[2]
    with contextledger.open_ledger(pg_url) as ledger:
        store = ledger.ports.log
        assert isinstance(store, RecorderEventStore)
        recorder = store.recorder
        assert isinstance(recorder, PostgresRecorder)
        before = recorder.notifier.sent
        for version in (1, 2):
            state = b"\x00\x01state" * version
            recorder.insert_events([StoredEvent("fast", version, "topic-x", state)])
            params: tuple[list[Any], ...] = (
                ["general"],
                [version],
                ["topic-x"],
                [state],
                [],
                [],
                [],
                [],
                [],
                [],
            )
            conn = recorder.datastore.pool.getconn()
            try:
                _append_on(conn, statement=recorder._append, params=params)
            finally:
                recorder.datastore.pool.putconn(conn)
        with pytest.raises(IntegrityError):
            recorder.insert_events([StoredEvent("fast", 4, "topic-x", b"")])
        recorder.notifier.close()
        assert recorder.notifier.sent > before
    with psycopg.connect(PG_BASE.split("?")[0], autocommit=True) as conn:
        assert _rows(conn, schema, "fast") == _rows(conn, schema, "general")
        assert len(_rows(conn, schema, "fast")) == 2
