"""Our recorders keep the contract of what they inherit: eventsourcing's own recorder suite, run on each.

``SQLiteRecorder``, ``PostgresRecorder`` and ``MemoryRecorder`` subclass eventsourcing's application
recorders, so anything that accepts one of those may be handed one of ours. eventsourcing ships the
suite its own recorders pass (``eventsourcing.tests.persistence.ApplicationRecorderTestCase``); it runs
here against ours with its assertions unchanged. Each override below is a rule of ours that is
deliberately stricter than the base contract, and says which:

- ``new_originator_id``: our streams are named by text (session ids and their ``::`` side streams),
  so the datastores are opened with ``originator_id_type="text"``, as ``open_sqlite`` and
  ``open_postgres`` do, and notifications carry text ids; the suite compares them with the ids it
  wrote, so it writes the text of a UUID. UUID ids are still accepted:
  ``test_an_eventsourcing_repository_runs_on_it`` runs eventsourcing's own ``EventStore`` and
  ``Repository`` with UUID-keyed aggregates on each recorder (its mapper turns the text back into UUIDs).
- ``test_concurrent_no_conflicts`` and ``test_concurrent_throughput``: a stream's positions are
  contiguous from 1 (a position is the ledger's version; an append that leaves a gap is refused with
  eventsourcing's ``IntegrityError``). These two tests write versions ``0..n-1`` to fresh streams;
  they run unchanged except that each version is shifted by one on its way into ``insert_events``.
  ``test_refuses_a_gap_and_version_zero`` pins the stricter rule itself.
- ``test_performance``: kept, it prints a timing and asserts nothing (timings live in ``bench/``).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from contextledger.adapters.store.memory import MemoryRecorder
from contextledger.adapters.store.postgres import PostgresRecorder, open_postgres
from contextledger.adapters.store.sqlite import SQLiteRecorder, open_sqlite
from eventsourcing.application import Repository
from eventsourcing.domain import Aggregate, event
from eventsourcing.persistence import (
    ApplicationRecorder,
    DatetimeAsISO,
    DecimalAsStr,
    EventStore,
    IntegrityError,
    JSONTranscoder,
    Mapper,
    StoredEvent,
    UUIDAsHex,
)
from eventsourcing.tests.persistence import ApplicationRecorderTestCase

from tests.conftest import require_postgres


class _ShiftedVersions:
    """A recorder seen through one change: every version written is one higher (0..n-1 → 1..n)."""

    def __init__(self, recorder: ApplicationRecorder) -> None:
        self._recorder = recorder

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        shifted = [
            StoredEvent(
                originator_id=e.originator_id,
                originator_version=e.originator_version + 1,
                topic=e.topic,
                state=e.state,
            )
            for e in stored_events
        ]
        return self._recorder.insert_events(shifted, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._recorder, name)


class LedgerRecorderContract(ApplicationRecorderTestCase[Any]):
    """eventsourcing's application-recorder suite, with the overrides the module docstring lists."""

    __test__ = False

    def open_recorder(self) -> ApplicationRecorder:
        """Return a recorder of this backend on a fresh, empty store."""
        raise NotImplementedError

    def create_recorder(self) -> Any:
        """The recorder under test, kept so the test can check its exact class."""
        recorder = self.open_recorder()
        self.recorders.append(recorder)
        return recorder

    def setUp(self) -> None:
        """No recorder opened yet."""
        self.recorders: list[ApplicationRecorder] = []

    def new_originator_id(self) -> str:  # type: ignore[override]
        """Override: streams are named by text (see the module docstring)."""
        return str(uuid.uuid4())

    def test_concurrent_no_conflicts(self, initial_position: int = 0) -> None:
        """Override: the base test with versions shifted to start at 1 (see the module docstring).

        The base test stops its two reader threads without joining them: they are joined here before
        the store closes (a read still running on a closed SQLite connection crashes the process). Only
        threads that are not daemons are joined: the readers are not, while the PostgreSQL connection
        pool's workers and scheduler are, and run until the store closes (each join timed out: 120 s).
        """
        opened = self.create_recorder
        self.create_recorder = lambda: _ShiftedVersions(opened())  # type: ignore[method-assign]
        before = set(threading.enumerate())
        try:
            super().test_concurrent_no_conflicts(initial_position)
        finally:
            for thread in set(threading.enumerate()) - before:
                if not thread.daemon:
                    thread.join(timeout=30)

    def test_concurrent_throughput(self) -> None:
        """Override: the base test with versions shifted to start at 1 (see the module docstring)."""
        opened = self.create_recorder
        self.create_recorder = lambda: _ShiftedVersions(opened())  # type: ignore[method-assign]
        super().test_concurrent_throughput()

    def test_refuses_a_gap_and_version_zero(self) -> None:
        """Our stricter rule: a stream starts at 1 and grows by one; anything else is an IntegrityError."""
        recorder = self.create_recorder()
        stream = self.new_originator_id()

        def event(version: int) -> StoredEvent:
            return StoredEvent(originator_id=stream, originator_version=version, topic="t", state=b"s")

        with pytest.raises(IntegrityError, match="would leave a gap"):
            recorder.insert_events([event(0)])
        assert recorder.insert_events([event(1), event(2)]) == [1, 2]
        with pytest.raises(IntegrityError, match="would leave a gap"):
            recorder.insert_events([event(4)])
        assert recorder.insert_events([event(3)]) == [3]
        assert [e.originator_version for e in recorder.select_events(stream)] == [1, 2, 3]


class Dog(Aggregate):
    """An eventsourcing aggregate with the default (UUID) ids, as an eventsourcing application has."""

    @event("Registered")
    def __init__(self, name: str) -> None:
        self.name = name
        self.tricks: list[str] = []

    @event("TrickAdded")
    def add_trick(self, trick: str) -> None:
        self.tricks.append(trick)


class EventStoreOnLedgerRecorders:
    """eventsourcing's own event store and repository, on our recorder, with UUID-keyed aggregates."""

    def test_an_eventsourcing_repository_runs_on_it(self) -> None:
        """Aggregates with UUID ids are stored, appended to in a second batch and read back whole."""
        transcoder = JSONTranscoder()
        for transcoding in (UUIDAsHex(), DatetimeAsISO(), DecimalAsStr()):
            transcoder.register(transcoding)
        store = EventStore(mapper=Mapper(transcoder=transcoder), recorder=self.create_recorder())  # type: ignore[attr-defined]
        dog = Dog("Fido")
        store.put(dog.collect_events())
        dog.add_trick("roll over")
        dog.add_trick("play dead")
        store.put(dog.collect_events())
        again = Repository(store).get(dog.id)
        assert (again.id, again.version, again.tricks) == (dog.id, 3, ["roll over", "play dead"])


class TestSQLiteRecorderContract(EventStoreOnLedgerRecorders, LedgerRecorderContract):
    """The suite on ``SQLiteRecorder`` over a real file, opened as ``open_sqlite`` opens it."""

    __test__ = True

    @pytest.fixture(autouse=True)
    def _folder(self, tmp_path: Path) -> None:
        self.folder = tmp_path

    def open_recorder(self) -> ApplicationRecorder:
        store = open_sqlite(f"sqlite:///{self.folder / f'{uuid.uuid4().hex}.db'}")
        self.addCleanup(store.close)
        assert type(store.recorder) is SQLiteRecorder
        return store.recorder


class TestPostgresRecorderContract(EventStoreOnLedgerRecorders, LedgerRecorderContract):
    """The suite on ``PostgresRecorder`` in a fresh schema, opened as ``open_postgres`` opens it."""

    __test__ = True

    @pytest.fixture(autouse=True)
    def _schema(self, pg_url: str) -> None:
        require_postgres()
        self.url = pg_url

    def open_recorder(self) -> ApplicationRecorder:
        assert not self.recorders, "one recorder per test: the schema is fresh once"
        store = open_postgres(self.url)
        self.addCleanup(store.close)
        assert type(store.recorder) is PostgresRecorder
        return store.recorder


class TestMemoryRecorderContract(EventStoreOnLedgerRecorders, LedgerRecorderContract):
    """The suite on ``MemoryRecorder`` (``memory://``)."""

    __test__ = True

    def open_recorder(self) -> ApplicationRecorder:
        return MemoryRecorder()
