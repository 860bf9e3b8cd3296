"""Named snapshots of derived state: the one load/validate/save policy every cached projection uses."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import msgspec
from contextledger.application.kernel.logs import get_logger
from contextledger.domain.errors import ContextLedgerError
from contextledger.domain.ports import SnapshotStore

__all__ = ["SnapshotSlot"]

log = get_logger(__name__)

T = TypeVar("T")


class SnapshotSlot:
    """Loads and saves snapshots of derived state in a ``SnapshotStore``.

    Snapshots are derived from the log, so every failure degrades to "no snapshot": an unreadable or
    inconsistent one is ignored (the caller refolds from the log) and a failed write is logged, never
    raised, because the append or render it follows has already succeeded.
    """

    def __init__(self, store: SnapshotStore) -> None:
        self.store = store

    def load(
        self,
        name: str,
        decode: Callable[[bytes], T],
        valid: Callable[[T, int], bool],
    ) -> tuple[int, T] | None:
        """Return the stored position and decoded state of ``name`` when ``valid(state, position)``."""
        found = self.store.load_snapshot(name)
        if found is None:
            return None
        position, payload = found
        try:
            state = decode(payload)
        except (msgspec.DecodeError, msgspec.ValidationError, TypeError, KeyError, ValueError):
            log.info("snapshot_unreadable", name=name)
            return None
        if not valid(state, position):
            log.info("snapshot_inconsistent", name=name, position=position)
            return None
        return position, state

    def save(self, name: str, position: int, payload: bytes) -> bool:
        """Store a snapshot; return whether it was written."""
        try:
            self.store.save_snapshot(name, position, payload)
        except ContextLedgerError as error:
            log.warning("snapshot_not_saved", name=name, error=str(error))
            return False
        return True
