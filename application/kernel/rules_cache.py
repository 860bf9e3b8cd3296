"""The ledger's cache of per-session rules state: LRU in memory, caught up from the log, snapshotted."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import msgspec
from contextledger.application.kernel.snapshots import SnapshotSlot
from contextledger.domain.events import AnyEvent
from contextledger.domain.ports import EventLog, SnapshotStore
from contextledger.domain.session import SessionState

__all__ = ["RULES_SNAPSHOT_EVERY", "RulesCache"]

RULES_SNAPSHOT_EVERY = 1_000
"""Persist a session's rules state when it moved this many events past its last snapshot."""


def _snapshot_name(session_id: str) -> str:
    return f"rules/v2/{session_id}"  # v2: pending calls by id (reused ids), not issued/answered sets


class RulesCache:
    """Keeps the small rules state of recently used sessions, so appends never replay a whole session.

    A state missing from memory starts from its persisted snapshot (if any) and reads only the events
    after it; every ``RULES_SNAPSHOT_EVERY`` events the state is snapshotted again.
    """

    def __init__(self, log: EventLog, snapshots: SnapshotStore, size: int) -> None:
        self.log = log
        self.slot = SnapshotSlot(snapshots)
        self.size = size
        self._states: OrderedDict[str, SessionState] = OrderedDict()
        self._snapshot_at: dict[str, int] = {}

    def get(self, session_id: str) -> SessionState:
        """Return the session's rules state, caught up with the store."""
        state = self._states.get(session_id) or self._from_snapshot(session_id)
        try:
            for recorded in self.log.read(session_id, after=state.version):
                state.apply(recorded.event)
        except Exception:
            self._states.pop(session_id, None)
            raise
        self.remember(state)
        return state

    def cached(self, session_id: str) -> SessionState | None:
        """Return the session's state as last seen in memory (maybe behind the store), or None."""
        return self._states.get(session_id)

    def snapshot_after(
        self, state: SessionState, events: Sequence[AnyEvent]
    ) -> tuple[tuple[str, int, bytes], SessionState] | None:
        """The snapshot ``remember`` would save once ``events`` follow ``state``, with the state it holds.

        None while not due. The append of ``events`` stores the snapshot in its own transaction
        (``EventLog.append(snapshot=...)``): no second commit; once stored, the state it holds is the
        session's (``remember``). ``state`` is not changed: the events are applied to a copy.
        """
        position = state.version + len(events)
        if not self._due(state.session_id, position):
            return None
        after = SessionState(state.session_id)
        after.version = state.version
        after.calls.names = dict(state.calls.names)
        after.calls.pending = dict(state.calls.pending)
        after.apply_all(events)
        payload = msgspec.msgpack.encode(after.to_snapshot())
        return (_snapshot_name(state.session_id), position, payload), after

    def remember(self, state: SessionState, stored: tuple[str, int, bytes] | None = None) -> None:
        """Keep ``state`` (most recently used) and snapshot it when it moved far enough.

        ``stored``: the snapshot of ``state`` its append stored (``snapshot_after``), not saved again.
        """
        if stored is not None:
            self._snapshot_at[state.session_id] = stored[1]
        elif self._due(state.session_id, state.version):
            payload = msgspec.msgpack.encode(state.to_snapshot())
            if self.slot.save(_snapshot_name(state.session_id), state.version, payload):
                self._snapshot_at[state.session_id] = state.version
        self._states[state.session_id] = state
        self._states.move_to_end(state.session_id)
        while len(self._states) > self.size:
            self._states.popitem(last=False)

    def _due(self, session_id: str, version: int) -> bool:
        """Whether a state at ``version`` moved far enough past the session's last snapshot."""
        return version - self._snapshot_at.get(session_id, 0) >= RULES_SNAPSHOT_EVERY

    def _from_snapshot(self, session_id: str) -> SessionState:
        def decode(payload: bytes) -> SessionState:
            return SessionState.from_snapshot(session_id, msgspec.msgpack.decode(payload))

        def valid(state: SessionState, position: int) -> bool:
            # The state of this stream's past, at the position it claims.
            return 1 <= state.version == position <= self.log.version(session_id)

        found = self.slot.load(_snapshot_name(session_id), decode, valid)
        if found is None:
            return SessionState(session_id)
        self._snapshot_at[session_id] = found[0]
        return found[1]
