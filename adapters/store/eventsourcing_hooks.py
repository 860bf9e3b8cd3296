"""The one module that touches eventsourcing's private API; tests/adapters/store/test_hooks.py guards it.

Every other store module uses only eventsourcing's public classes, methods and attributes. When an
eventsourcing release renames or reshapes one of the names below, the hook test fails first, here.
"""

from __future__ import annotations

from collections.abc import Sequence
from threading import RLock

from eventsourcing.persistence import StoredEvent
from eventsourcing.popo import POPOApplicationRecorder

__all__ = ["PRIVATE_NAMES", "InMemoryTable"]

PRIVATE_NAMES = (
    "_database_lock",
    "_stored_events",
    "_stored_events_index",
    "_assert_uniqueness",
    "_update_table",
)
"""The private names of ``POPOApplicationRecorder`` this module reads; nothing else may use them."""


class InMemoryTable(POPOApplicationRecorder):
    """eventsourcing's in-memory recorder with its private table reached through stable names."""

    @property
    def database_lock(self) -> RLock:
        """The re-entrant lock that guards the in-memory table."""
        lock: RLock = self._database_lock
        return lock

    @property
    def rows(self) -> list[StoredEvent]:
        """Every stored event, in insertion (notification) order."""
        rows: list[StoredEvent] = self._stored_events
        return rows

    def stream_index(self, stream_id: str) -> dict[int, int] | None:
        """Map a stream's positions to row numbers, or None for an unknown stream."""
        index: dict[int, int] | None = self._stored_events_index.get(stream_id)
        return index

    def assert_new(self, stored_events: Sequence[StoredEvent]) -> None:
        """Raise eventsourcing's ``IntegrityError`` when a position is taken or repeated in the batch."""
        self._assert_uniqueness(stored_events)

    def add_rows(self, stored_events: Sequence[StoredEvent]) -> None:
        """Append rows to the table and its index (call with ``database_lock`` held)."""
        self._update_table(stored_events)
