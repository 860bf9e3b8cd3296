"""A rebuild restarted right after a crash waits for the leases the killed run's workers still hold."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading

import contextledger
import pytest
from contextledger.adapters.cli.common import EXIT_STORE_UNAVAILABLE, exit_code_for
from contextledger.adapters.store.projections import RecorderProjections
from contextledger.application.rebuild.lease_wait import lease_names, wait_for_leases
from contextledger.domain.errors import ProjectionLockedError


@pytest.fixture
def worker():
    """A live process standing for a worker of a killed rebuild; reaped as soon as it exits."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.0)"])
    reaper = threading.Thread(target=child.wait)
    reaper.start()
    yield child
    child.kill()
    reaper.join()


def projections_of(ledger):
    """Another projections adapter over the ledger's store (a runner of its own, with its own owner)."""
    return RecorderProjections(ledger.ports.log)


def _reaped(pid: int) -> bool:
    """Whether the process has exited and been reaped (its pid is gone).

    Not ``Popen.poll()``: while the reaper thread is inside ``wait()``, ``poll()`` answers None until that
    thread has stored the return code, even after the kernel has reaped the process.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _held_by(ledger, child, name):
    holder = projections_of(ledger)
    holder.owner = f"{socket.gethostname()}:{child.pid}:dead0001"
    holder.acquire(name)


def test_a_lease_held_by_a_live_worker_is_waited_for_then_taken(tmp_path, worker):
    """The shard lease of a still-running worker: the wait says so once, and ends when the worker exits."""
    with contextledger.open_ledger(f"sqlite:///{tmp_path / 'l.db'}") as ledger:
        names = lease_names(["context/v"], 2)
        assert names == ["context/v", "context/v@0/2", "context/v@1/2"]
        _held_by(ledger, worker, "context/v@1/2")
        store = projections_of(ledger)
        with pytest.raises(ProjectionLockedError):
            store.acquire("context/v@1/2")
        told: list[ProjectionLockedError] = []
        wait_for_leases(store, names, on_wait=told.append, poll=0.05, timeout=30)
        assert _reaped(worker.pid)
        assert [e.projection for e in told] == ["context/v@1/2"]
        store.acquire("context/v@1/2").release()


def test_a_holder_still_running_after_the_wait_is_a_retry_later_error(tmp_path, worker):
    """Past the timeout the lease error is raised, and the CLI reports it with the retry-later exit code 3."""
    with contextledger.open_ledger(f"sqlite:///{tmp_path / 'l.db'}") as ledger:
        _held_by(ledger, worker, "context/v")
        with pytest.raises(ProjectionLockedError) as raised:
            wait_for_leases(projections_of(ledger), ["context/v"], timeout=0.2, poll=0.05)
        assert worker.poll() is None
        assert exit_code_for(raised.value) == EXIT_STORE_UNAVAILABLE == 3


def test_leases_no_live_holder_has_are_not_written_to_wait_for_them(tmp_path):
    """Only a dead holder's lease and none: the wait reads the leases once and takes none of them."""
    with contextledger.open_ledger(f"sqlite:///{tmp_path / 'l.db'}") as ledger:
        dead = projections_of(ledger)
        dead.owner = f"{socket.gethostname()}:999999999:dead0001"  # no such process
        dead.acquire("context/v")
        store = projections_of(ledger)
        taken: list[str] = []
        acquire = store.acquire
        store.acquire = lambda name: taken.append(name) or acquire(name)  # type: ignore[method-assign]
        wait_for_leases(store, lease_names(["context/v"], 2))
        assert taken == []
        assert [(lease.projection, lease.alive) for lease in store.leases()] == [("context/v", False)]
        store.acquire("context/v").release()  # the run takes the dead holder's lease over
        assert taken == ["context/v"]
        assert store.leases() == []
