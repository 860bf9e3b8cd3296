"""A view folded from one kind of side stream (``<session>::<kind>``), its rows read back a batch at once."""

from __future__ import annotations

from collections.abc import Sequence

from contextledger.application.kernel.logs import get_logger
from contextledger.application.kernel.messages import SIDE_STREAM_SEPARATOR
from contextledger.application.views.view_runner import KnownRows, Rows, split_stream
from contextledger.domain.errors import ContextLedgerError
from contextledger.domain.ports import Notification, ProjectionRows

__all__ = ["SideStreamView"]

log = get_logger(__name__)


class SideStreamView:
    """Folds the notifications of ``<session>::<kind>`` streams into rows that belong to their session.

    Per batch: the sessions touched, their rows that may exist read back in one call (none when the
    view started empty and has not written them), then ``fold_session`` per session. A session that
    fails goes into ``failed`` and the rest of the batch commits. Subclasses set ``kind`` and define
    ``row_keys`` and ``fold_session``.

    Args:
        store: Where the rows are (read back to continue them).
        name: The name of the rows and checkpoint (another name builds a second copy beside it).
    """

    kind = ""
    """The side stream's suffix after ``::``."""

    def __init__(self, store: ProjectionRows, *, name: str) -> None:
        """Keep the store; nothing is read until the first batch."""
        self.store = store
        self.name = name
        self.failed: dict[str, str] = {}
        self.known = KnownRows()

    def begin(self, tracking: int) -> None:
        """Note whether every row is known: the view starts empty, or resumes where this instance left it."""
        self.known.begin(tracking)

    def fold(self, after: int, upto: int, batch: Sequence[Notification]) -> dict[str, Rows]:
        """Fold a batch's notifications of this kind into the rows of their sessions."""
        del after
        self.known.folded_upto = upto
        touched: dict[str, list[Notification]] = {}
        suffix = SIDE_STREAM_SEPARATOR + self.kind
        for note in batch:
            if suffix in note.stream_id:  # most notes are a session's own: one scan rules them out
                session_id, kind = split_stream(note.stream_id)
                if kind == self.kind:
                    touched.setdefault(session_id, []).append(note)
        keys = sorted(
            {
                key
                for session_id, notes in touched.items()
                if self.known.may_exist(session_id)
                for key in self.row_keys(session_id, notes)
            }
        )
        stored = self.store.load_rows(self.name, keys) if keys else {}
        rows: Rows = {}
        for session_id, notes in touched.items():
            try:
                folded = self.fold_session(session_id, notes, stored)
            except ContextLedgerError as error:
                self.failed[session_id] = str(error)
                log.warning("view_session_failed", view=self.name, session_id=session_id)
                continue
            rows.update(folded)
            if folded:
                self.known.written.add(session_id)
        return {self.name: rows}

    def row_keys(self, session_id: str, notes: list[Notification]) -> list[str]:
        """The keys of the rows ``notes`` continue (read back when they may exist)."""
        raise NotImplementedError

    def fold_session(self, session_id: str, notes: list[Notification], stored: Rows) -> Rows:
        """Return the rows of a session after ``notes``, continuing its ``stored`` rows."""
        raise NotImplementedError
