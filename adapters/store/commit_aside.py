"""A projection commit run on a thread of its own while its caller folds on, its rows read back meanwhile."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from contextledger.application.kernel.aside import Aside
from contextledger.domain.ports import ProjectionCommit

__all__ = ["AsideCommit"]

Rows = dict[str, tuple[int, bytes]]


class AsideCommit:
    """One ``commit_many`` running on its own thread; ``rows`` are what it writes, by view name.

    The thread that started it (``owner``) reads those rows as if they were committed (read your
    writes): a batch folded while the previous one commits sees the rows that batch wrote. Other
    threads read only what is committed. ``settle`` waits for the commit and raises its error.
    SQLite releases the GIL while it writes, so the write overlaps the next batch's Python.
    """

    def __init__(
        self, commit: Callable[[Sequence[ProjectionCommit]], None], commits: Sequence[ProjectionCommit]
    ) -> None:
        """Start ``commit(commits)`` on a new thread."""
        self.owner = threading.get_ident()
        self.rows: dict[str, Rows] = {}
        for each in commits:
            self.rows.setdefault(each.rows_of, {}).update(each.rows)
        self._aside = Aside(lambda: commit(commits), name="contextledger-commit")

    def settle(self) -> None:
        """Wait for the commit; raise what it raised (then nothing of it was written)."""
        self._aside.settle()

    def overlay(self, projection: str, found: Rows, keys: Callable[[str], bool]) -> Rows:
        """``found`` (as read) with the rows of ``projection`` this commit writes that ``keys`` accepts.

        Only on the thread that started the commit; ``found`` itself is returned when nothing is added.
        """
        pending = self.rows.get(projection)
        if not pending or threading.get_ident() != self.owner:
            return found
        added = {key: row for key, row in pending.items() if keys(key)}
        return {**found, **added} if added else found
