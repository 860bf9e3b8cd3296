"""The writer's NOTIFY after its commits, sent by a thread of its own, at most one per interval (ADR 0047).

Every append used to be followed by a ``SELECT pg_notify(...)`` of its own (ADR 0042): a second round trip
and a second transaction per append, about a quarter of an append's CPU, client and server, and one
wake-up of every listener per append. Listeners only need to know that *something* was committed since
they last looked (a woken waiter reads the newest id; a view reads everything up to it), so one NOTIFY
sent after several commits wakes them as well as one per commit.

``CommitNotifier.committed`` is called by a writer once its append has committed. It marks a NOTIFY
as due and, when no NOTIFY was sent in the last ``interval`` seconds, the thread sends it at once; else
it sends one when the interval ends, covering every commit marked before it. Every commit is therefore
followed, within ``interval`` plus one round trip, by a NOTIFY sent after it. The thread ends after a
second without commits and is started again by the next one; ``close`` sends what is due before the
pool closes. A failed NOTIFY is logged and dropped (the append has committed; listeners see the rows
at the next NOTIFY or at their own poll timeout, as after a writer killed before its NOTIFY).

With no listener, no NOTIFY (ADR 0079). ``send`` returns whether a listener heard it; when none did, the
notifier stays quiet for ``QUIET`` seconds: the commits made meanwhile send nothing, not even a round trip.
A listener that starts meanwhile is not yet known to this writer, so it looks for new rows by itself
every ``UNHEARD_POLL`` seconds for its first ``UNHEARD`` seconds (``PostgresNotificationWaiter``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from contextledger.application.kernel.logs import get_logger

__all__ = ["NOTIFY_INTERVAL", "QUIET", "UNHEARD", "UNHEARD_POLL", "CommitNotifier"]

log = get_logger(__name__)

NOTIFY_INTERVAL = 0.05
"""Seconds between two NOTIFYs of one ledger: a commit is announced at once after a quiet interval,
else at the interval's end (with every commit made meanwhile). The URL's ``notify_interval`` sets it."""

QUIET = 1.0
"""Seconds a writer sends no NOTIFY after one found no listener (its commits are read at the next look)."""

UNHEARD = 2 * QUIET
"""Seconds a new listener looks for rows by itself: writers that found none before it took its lock are
quiet for at most ``QUIET`` seconds after that (their clocks and ours may differ: twice as long)."""

UNHEARD_POLL = NOTIFY_INTERVAL
"""Seconds between a new listener's own looks, while writers may not know it yet: a NOTIFY's pace."""

_IDLE = 1.0
"""Seconds without a commit after which the sending thread ends (the next commit starts another)."""


class CommitNotifier:
    """Sends ``send()`` (the NOTIFY) after commits from a thread of its own, once per ``interval`` at most."""

    def __init__(self, send: Callable[[], bool], *, interval: float = NOTIFY_INTERVAL) -> None:
        """``send`` runs one NOTIFY as a transaction of its own and returns whether a listener heard it.

        It may raise (logged, dropped). After a send that no listener heard, commits send nothing for
        ``QUIET`` seconds.
        """
        self._send = send
        self._interval = interval
        self._quiet_until = 0.0
        """Until when (``time.monotonic``) commits send nothing: the last send found no listener."""
        self._due = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._last = -interval
        self._closed = False
        self.sent = 0
        """How many NOTIFY statements were sent, heard or not (for tests)."""

    def committed(self) -> None:
        """Note a commit: a NOTIFY sent after this call follows within ``interval`` plus a round trip.

        Unless the last NOTIFY, less than ``QUIET`` seconds ago, found no listener: then nothing is sent.
        """
        if self._due.is_set() and not self._closed:  # (``close`` sets ``_closed`` before it sets ``_due``)
            return  # a NOTIFY not sent yet covers this commit too
        if time.monotonic() < self._quiet_until:
            return  # no listener a moment ago: one that came since looks by itself (``UNHEARD``)
        with self._lock:
            if self._closed:
                self._deliver()  # after close no thread runs: notify now, in the caller's thread
                return
            self._due.set()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="contextledger-notify", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while not self._closed:
            if not self._due.wait(_IDLE):
                with self._lock:
                    if not self._due.is_set():  # a commit marked under the lock keeps this thread
                        self._thread = None
                        return
            if self._closed:
                return  # ``close`` sends what is due
            pause = self._last + self._interval - time.monotonic()
            if pause > 0 and self._stop.wait(pause):  # commits made meanwhile join this NOTIFY
                return  # closed while pausing: ``close`` sends what is due
            self._due.clear()  # before the send: a commit marked after this gets a NOTIFY of its own
            self._deliver()

    def _deliver(self) -> None:
        try:
            heard = self._send()
            self.sent += 1
            if not heard:
                self._quiet_until = time.monotonic() + QUIET
        except Exception as error:  # noqa: BLE001  # the appends have committed: a lost wake-up is logged
            log.warning("notify_failed", error=str(error))
        self._last = time.monotonic()

    def close(self) -> None:
        """Send the NOTIFY still due (in the caller's thread), stop the thread; later commits notify now."""
        with self._lock:
            self._closed = True
            thread, self._thread = self._thread, None
            due = self._due.is_set()
            self._due.set()  # wakes the thread, which sees ``_closed`` and ends
            self._stop.set()
        if thread is not None:
            thread.join()
        if due:
            self._deliver()
        self._due.clear()
