"""Waiting for projection leases a finishing runner still holds (a restart right after a crash)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from contextledger.application.views.view_runner import Shard
from contextledger.domain.errors import ProjectionLockedError
from contextledger.domain.ports import ProjectionStore

__all__ = ["LEASE_WAIT_SECONDS", "lease_names", "wait_for_leases"]

LEASE_WAIT_SECONDS = 60.0
"""How long a rebuild waits for a live holder (the workers of a killed run finish their batch and exit)."""


def lease_names(views: Iterable[str], workers: int) -> list[str]:
    """The leases a rebuild of ``views`` in ``workers`` processes takes: each view's, and each shard's."""
    names = list(views)
    if workers <= 1:
        return names
    return names + [Shard(index=i, count=workers).checkpoint(v) for v in names for i in range(workers)]


def wait_for_leases(
    store: ProjectionStore,
    names: Iterable[str],
    *,
    timeout: float = LEASE_WAIT_SECONDS,
    on_wait: Callable[[ProjectionLockedError], None] | None = None,
    poll: float = 0.5,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Return once every lease of ``names`` can be taken; hold none of them.

    A lease whose holder died is taken over by the store at once; one whose holder still runs
    (the worker processes of a rebuild killed with -9 finish their current batch, then stop) is
    waited for, ``on_wait`` told once per holder.

    Raises:
        ProjectionLockedError: a holder still has a lease after ``timeout`` seconds (CLI exit 3: retry later).
    """
    names = list(names)
    if not any(lease.alive for lease in store.leases(names)):
        return  # one read: nothing to wait for (a dead holder's lease is taken over when the run takes it)
    deadline = clock() + timeout
    told: set[str] = set()
    for name in names:
        while True:
            try:
                store.acquire(name).release()
                break
            except ProjectionLockedError as error:
                if clock() >= deadline:
                    raise
                if on_wait is not None and error.holder not in told:
                    told.add(error.holder)
                    on_wait(error)
                sleep(poll)
