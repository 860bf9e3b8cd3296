"""Work run on a thread of its own while its caller goes on; ``settle`` waits for it and raises its error."""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["Aside"]


class Aside:
    """One call running on its own thread (a write that releases the GIL while its caller folds on).

    The thread is not a daemon: a process that ends normally lets the write finish.
    """

    def __init__(self, work: Callable[[], None], *, name: str) -> None:
        """Start ``work()`` on a new thread called ``name``."""
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(work,), name=name, daemon=False)
        self._thread.start()

    def _run(self, work: Callable[[], None]) -> None:
        try:
            work()
        except BaseException as error:  # noqa: BLE001 - handed to the caller by ``settle``
            self._error = error

    def settle(self) -> None:
        """Wait for the work; raise what it raised (once)."""
        self._thread.join()
        error, self._error = self._error, None
        if error is not None:
            raise error
