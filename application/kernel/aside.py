"""Work run on a thread of its own while its caller goes on: a write (``Aside``) or a read (``Ahead``)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["Ahead", "Aside"]

T = TypeVar("T")


class Ahead(Generic[T]):
    """One read running on its own thread, whose result the caller takes later (``result``).

    For reads that SQLite does with the GIL released: the caller folds on meanwhile, and the page
    cache the database resets after every commit is filled on the other core. The thread is a
    daemon (it only reads) unless ``daemon`` is off; a read nobody takes is still waited for by
    whoever drops it.
    """

    def __init__(self, read: Callable[[], T], *, name: str, daemon: bool = True) -> None:
        """Start ``read()`` on a new thread called ``name``."""
        self._found: list[T] = []
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(read,), name=name, daemon=daemon)
        self._thread.start()

    def _run(self, read: Callable[[], T]) -> None:
        try:
            self._found.append(read())
        except BaseException as error:  # noqa: BLE001 - handed to the caller by ``result``
            self._error = error

    def result(self) -> T:
        """Wait for the read; return what it read, or raise what it raised."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._found[0]


class Aside:
    """One call running on its own thread (a write that releases the GIL while its caller folds on).

    An ``Ahead`` whose result is nothing. The thread is not a daemon: a process that ends normally lets
    the write finish.
    """

    def __init__(self, work: Callable[[], None], *, name: str) -> None:
        """Start ``work()`` on a new thread called ``name``."""
        self._work: Ahead[None] | None = Ahead(work, name=name, daemon=False)

    def settle(self) -> None:
        """Wait for the work; raise what it raised (once)."""
        work, self._work = self._work, None
        if work is not None:
            work.result()
