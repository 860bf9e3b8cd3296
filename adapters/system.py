"""The machine's clock, id source and process liveness, behind the core's ports."""

from __future__ import annotations

import os
import re
import socket
import uuid
from datetime import UTC, datetime

__all__ = ["SystemClock", "UuidSource", "process_alive", "worker_alive", "worker_name"]


def process_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this host (one owned by another user counts as alive)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def worker_name() -> str:
    """This process's name in summary leases: ``host-pid``."""
    return f"{socket.gethostname()}-{os.getpid()}"


def worker_alive(name: str) -> bool:
    """Whether the holder of a summary lease may still run (``False``: a gone ``host-pid`` of this host).

    Any other name (another host, a chosen ``--id``) counts as alive: its lease ends when its heartbeat
    stops renewing it.
    """
    found = re.fullmatch(re.escape(socket.gethostname()) + r"-(\d+)", name)
    return found is None or process_alive(int(found.group(1)))


class SystemClock:
    """The wall clock, in UTC."""

    def now(self) -> datetime:
        """Return the current UTC time."""
        return datetime.now(UTC)


class UuidSource:
    """Random UUID4 ids, as hex strings."""

    def new_id(self) -> str:
        """Return a fresh random id."""
        return uuid.uuid4().hex
