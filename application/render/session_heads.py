"""A session's head and summary artifacts for a render, from one read of both streams' heads."""

from __future__ import annotations

from contextledger.application.kernel.ledger import Ledger
from contextledger.application.kernel.summary_log import summary_stream
from contextledger.domain.errors import SessionNotFoundError
from contextledger.domain.events import SummaryRecorded

__all__ = ["SessionHeads"]


class SessionHeads:
    """What a render must know of a session before it folds: its last position and its summary artifacts.

    A warm render mostly learns that nothing changed. The heads of the session and of its summary stream
    come from ONE read of the store (``EventLog.versions``), and the artifacts are read again only when
    either head moved since the last call for that session. A forgotten session's tombstone moves its
    head, so its artifacts are read again (and refused), never served from here.

    Args:
        ledger: The ledger the sessions are read from.
        size: How many sessions' artifacts to keep (the oldest kept is forgotten first).
    """

    def __init__(self, ledger: Ledger, size: int) -> None:
        """Read through ``ledger``, keeping the artifacts of up to ``size`` sessions."""
        self.ledger = ledger
        self._size = max(size, 1)
        self._kept: dict[str, tuple[int, int, list[SummaryRecorded]]] = {}

    def read(self, session_id: str) -> tuple[int, list[SummaryRecorded]]:
        """Return the session's last position and its artifacts, oldest first (shared: not to be changed).

        Raises:
            SessionNotFoundError: The session does not exist.
            SessionForgottenError: The session was forgotten.
        """
        side = summary_stream(session_id)
        heads = self.ledger.log.versions([session_id, side])
        head, side_head = heads[session_id], heads[side]
        if head == 0:
            raise SessionNotFoundError(session_id)
        kept = self._kept.pop(session_id, None)
        if kept is None or kept[:2] != (head, side_head):
            # Heads first, then the artifacts: an artifact stored in between is read now, and the side
            # head kept is older than it, so the next call reads the artifacts again (never fewer).
            kept = (head, side_head, self.ledger.summaries(session_id))
        self._kept[session_id] = kept
        if len(self._kept) > self._size:
            del self._kept[next(iter(self._kept))]
        return head, kept[2]
