"""Quick GIL handoffs while work runs on other threads beside a thread that runs Python all along."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["QUICK_SWITCH_SECONDS", "quick_handoffs"]

QUICK_SWITCH_SECONDS = 0.0005
"""The interpreter's switch interval inside ``quick_handoffs`` (CPython's default is 0.005 s)."""

_lock = threading.Lock()
_held = 0
_saved = 0.0


@contextmanager
def quick_handoffs() -> Iterator[None]:
    """Shorten the interpreter's switch interval for the block (at most ``QUICK_SWITCH_SECONDS``).

    A thread that returns from a call that released the GIL (an SQLite statement of a commit set
    aside, a page read ahead) waits for the GIL until the thread holding it drops it: while that one
    runs Python without a pause (a fold), after a whole switch interval. A commit of five statements
    took ~55 ms that way for ~13 ms of work, and the fold waited for it (ADR 0073). The number of
    handoffs does not change, only how long each waits. The interval is the process's: blocks on
    several threads share one shortening, and the last to end puts back the interval found by the
    first.
    """
    global _held, _saved  # noqa: PLW0603 - one setting per process, counted across threads
    with _lock:
        if _held == 0:
            _saved = sys.getswitchinterval()
            if _saved > QUICK_SWITCH_SECONDS:  # a host switching more often keeps its interval
                sys.setswitchinterval(QUICK_SWITCH_SECONDS)
        _held += 1
    try:
        yield
    finally:
        with _lock:
            _held -= 1
            if _held == 0 and _saved > QUICK_SWITCH_SECONDS:
                sys.setswitchinterval(_saved)
