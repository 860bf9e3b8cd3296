"""Pausing the cyclic garbage collector around work that allocates many objects and makes no cycles."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused"]


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block.

    For work that allocates many objects, holds them briefly and creates no reference cycles: a fold
    (decoding allocates millions of objects while thousands of folded states stay alive, so the
    collector's full passes walked every live state again and again: ~30% of a rebuild) and a batched
    append (a batch's events, rows and parameters are young objects the collector would walk and
    promote while they live, to find nothing: ADR 0048). Nothing is leaked: a cycle made meanwhile
    (by another thread) is collected once the collector runs again. Nested, it leaves the collector to
    the outer one (a caller that lets its objects go before the collector runs again spares it a pass
    over all of them).
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
