"""Guards the eventsourcing API the store relies on: a release that changes it fails here, loudly."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from threading import RLock

import eventsourcing
import pytest
from contextledger.adapters.store import eventsourcing_hooks
from contextledger.adapters.store.eventsourcing_hooks import PRIVATE_NAMES, InMemoryTable
from eventsourcing.persistence import IntegrityError, StoredEvent
from eventsourcing.popo import POPOApplicationRecorder
from eventsourcing.postgres import ConnectionPool, PostgresApplicationRecorder, PostgresDatastore
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteConnection, SQLiteCursor, SQLiteDatastore

STORE = Path(eventsourcing_hooks.__file__).resolve().parent


def row(stream: str, position: int) -> StoredEvent:
    """A stored event of no particular type."""
    return StoredEvent(originator_id=stream, originator_version=position, topic="t", state=b"x")


def test_the_private_names_exist_on_the_in_memory_recorder():
    """Every private attribute the hooks read is still there with the shape they expect."""
    recorder = POPOApplicationRecorder()
    for name in PRIVATE_NAMES:
        assert hasattr(recorder, name), f"eventsourcing {eventsourcing.__version__} dropped {name}"
    assert isinstance(recorder._database_lock, type(RLock()))
    assert isinstance(recorder._stored_events, list)
    assert isinstance(recorder._stored_events_index, dict)
    assert next(iter(inspect.signature(recorder._assert_uniqueness).parameters)) == "stored_events"
    assert next(iter(inspect.signature(recorder._update_table).parameters)) == "stored_events"


def test_the_hooks_behave_as_the_memory_backend_needs():
    """Rows are added and indexed; a taken position raises eventsourcing's IntegrityError."""
    table = InMemoryTable()
    with table.database_lock:
        table.assert_new([row("s", 1), row("s", 2)])
        table.add_rows([row("s", 1), row("s", 2)])
    assert [r.originator_version for r in table.rows] == [1, 2]
    assert table.stream_index("s") == {1: 0, 2: 1}
    assert table.stream_index("other") is None
    with pytest.raises(IntegrityError):
        table.assert_new([row("s", 2)])


@pytest.mark.parametrize(
    ("owner", "names"),
    [
        (SQLiteDatastore, ["get_connection", "transaction", "close"]),
        (SQLiteConnection, ["cursor", "commit", "rollback"]),
        (SQLiteApplicationRecorder, ["insert_events_statement", "select_notifications", "select_events"]),
        (PostgresDatastore, ["get_connection", "register_type_adapters", "close"]),
        (PostgresApplicationRecorder, ["stored_event_type_name", "sql_create_statements"]),
    ],
)
def test_the_public_surface_the_store_uses_is_there(owner, names):
    """Public methods and attributes the backends call (some are set in ``__init__``, so look at both)."""
    source = inspect.getsource(owner)
    for name in names:
        assert hasattr(owner, name) or f"self.{name}" in source, f"{owner.__name__}.{name} is gone"


def test_the_constructor_arguments_the_store_passes_are_accepted():
    """Keyword arguments given to eventsourcing's datastores and pool still exist."""
    pg = inspect.signature(PostgresDatastore.__init__).parameters
    assert {"schema", "originator_id_type"} <= set(pg)
    lite = inspect.signature(SQLiteDatastore.__init__).parameters
    assert {"db_name", "lock_timeout", "originator_id_type"} <= set(lite)
    pool = inspect.signature(ConnectionPool.__init__).parameters
    assert {"kwargs", "min_size", "max_size", "open", "configure", "timeout", "reconnect_timeout"} <= set(
        pool
    )
    assert "commit" in inspect.signature(SQLiteDatastore.get_connection).parameters
    assert hasattr(SQLiteCursor(None), "sqlite_cursor")  # type: ignore[arg-type]


def test_no_other_store_module_touches_eventsourcing_private_names():
    """Private eventsourcing names appear in eventsourcing_hooks.py only."""
    private = re.compile(
        r"\.(_insert_events|_insert_stored_events|_database_lock|_stored_events(_index)?|_assert_uniqueness|"
        r"_update_table|_create_table|_lock_table|_notify_channel|_sqlite_conn|_writer_lock|_lock_timeout|"
        r"_fetch_ids_after_insert_events|_pool|_get_semaphore)\b"
    )
    offenders = [
        f"{path.name}:{n}"
        for path in sorted(STORE.glob("*.py"))
        if path.name != "eventsourcing_hooks.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if private.search(line)
    ]
    assert offenders == []
