"""Writers of different sessions commit concurrently on PostgreSQL; readers never skip or repeat an event.

Sixteen writer processes append to sixteen sessions while random ones are killed with ``kill -9`` and
restarted. Meanwhile a live tail (the view runner, woken by LISTEN/NOTIFY) keeps the context view,
every audit view and a recording view that keeps each notification it is handed. Afterwards:
every acknowledged append is stored exactly once, the recording view saw the final log exactly (each
event once, in id order, none skipped), and every live view equals a fresh one-process rebuild.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import contextledger
import psycopg
import pytest
from contextledger.adapters.store import postgres_horizon
from contextledger.adapters.store.event_store import RecorderEventStore
from contextledger.adapters.store.notification_waiters import notification_waiter
from contextledger.application.rebuild.audit_views import AUDIT_VIEWS, audit_views
from contextledger.application.rebuild.projection_runner import ProjectionRunner
from contextledger.application.rebuild.rebuild import store_views
from contextledger.domain.ports import Notification, ProjectionStore

from tests.adapters.store.test_concurrent_writers import LONG, messages, start
from tests.conftest import PG_BASE

WORKER = Path(__file__).with_name("pg_log_workers.py")
WRITERS = 16
APPENDS = 60 if LONG else 20
KILLS = 24 if LONG else 8


class RecordingView:
    """A view that folds nothing and keeps every notification it is handed: (id, stream, position)."""

    name = "recording"

    def __init__(self) -> None:
        self.failed: dict[str, str] = {}
        self.seen: list[tuple[int, str, int]] = []

    def begin(self, tracking: int) -> None:
        """Nothing to prepare."""

    def fold(
        self, after: int, upto: int, batch: Sequence[Notification]
    ) -> dict[str, dict[str, tuple[int, bytes]]]:
        """Keep the batch's notifications; store no rows."""
        self.seen.extend((n.id, n.stream_id, n.position) for n in batch)
        return {}


def _spawn(url: str, session: str, wid: int, folder: Path) -> subprocess.Popen[bytes]:
    with (folder / f"err-{wid}").open("ab") as err:
        return subprocess.Popen(
            [sys.executable, str(WORKER), "write", url, session, str(wid), str(APPENDS), str(folder)],
            stderr=err,
        )


def _run_writers_with_kills(url: str, sessions: list[str], folder: Path, seed: int) -> int:
    """Run one writer per session to completion, killing random running ones; return the kills done."""
    rng = random.Random(seed)
    procs = {w: _spawn(url, sessions[w], w, folder) for w in range(WRITERS)}
    kills = 0
    deadline = time.monotonic() + 900
    while procs:
        assert time.monotonic() < deadline, "writers did not finish"
        time.sleep(rng.uniform(0.2, 0.8))
        for wid, proc in list(procs.items()):
            code = proc.poll()
            if code is None:
                continue
            if code == 0:
                del procs[wid]
            elif code == -signal.SIGKILL:
                procs[wid] = _spawn(url, sessions[wid], wid, folder)
            else:
                err = (folder / f"err-{wid}").read_text()[-2000:]
                pytest.fail(f"writer {wid} failed ({code}): {err}")
        running = [w for w, p in procs.items() if p.poll() is None]
        if kills < KILLS and running:
            procs[rng.choice(running)].send_signal(signal.SIGKILL)
            kills += 1
    return kills


def _rows(views: ProjectionStore, name: str) -> dict[str, tuple[int, bytes]]:
    return views.load_rows(name, views.row_keys(name))


@pytest.mark.parametrize("seed", [1])
def test_sixteen_writers_with_kills_a_live_tail_and_every_view_see_each_event_once(
    pg_url: str, tmp_path: Path, seed: int
) -> None:
    """Nothing acknowledged is lost, nothing is stored twice, the live tail skips and repeats nothing."""
    sessions = start(pg_url, WRITERS)
    recording = RecordingView()
    done = threading.Event()
    final_head = [0]
    errors: list[BaseException] = []
    with contextledger.open_ledger(pg_url) as ledger:
        views, reader = store_views(ledger)
        store = ledger.ports.log
        assert isinstance(store, RecorderEventStore)
        live = ProjectionRunner(
            ledger, reader, views, also=[*audit_views(ledger, views, AUDIT_VIEWS), recording]
        )
        waiter = notification_waiter(store)

        def tail() -> None:
            try:
                live.follow(
                    stop=lambda: (
                        done.is_set() and bool(recording.seen) and recording.seen[-1][0] >= final_head[0]
                    ),
                    waiter=waiter,
                    poll=0.2,
                )
            except BaseException as error:  # noqa: BLE001 - handed to the test thread
                errors.append(error)

        follower = threading.Thread(target=tail)
        follower.start()
        try:
            kills = _run_writers_with_kills(pg_url, sessions, tmp_path, seed)
            final_head[0] = reader.head()
            done.set()
            follower.join(timeout=300)
        finally:
            done.set()
            waiter.close()
        assert not follower.is_alive()
        assert errors == []
        assert kills == KILLS

        # Every acknowledged append is stored once; each session holds exactly its writer's messages.
        for wid, session in enumerate(sessions):
            acked = [int(n) for n in (tmp_path / f"ack-{wid}").read_text().split()]
            assert acked == list(range(APPENDS))
            assert messages(pg_url, session) == [f"{wid}-{n}" for n in range(APPENDS)]

        # The live tail saw the final log exactly: every event once, in id order, nothing skipped.
        log = [(n.id, n.stream_id, n.position) for n in reader.read_notifications(0, 1_000_000)]
        assert len(log) == WRITERS * (APPENDS + 1)
        assert recording.seen == log

        # Every view kept live under the churn equals a fresh rebuild of the same views.
        fresh = ProjectionRunner(
            ledger,
            reader,
            views,
            projection="fresh",
            also=audit_views(ledger, views, AUDIT_VIEWS, suffix="-fresh"),
        )
        assert fresh.run().failed == {}
        assert _rows(views, live.projection) == _rows(views, "fresh")
        assert len(_rows(views, live.projection)) >= WRITERS
        audit_live, audit_fresh = live.runner.views[1:-1], fresh.runner.views[1:]
        assert [v.name + "-fresh" for v in audit_live] == [v.name for v in audit_fresh]
        for kept, rebuilt in zip(audit_live, audit_fresh, strict=True):
            assert _rows(views, kept.name) == _rows(views, rebuilt.name)


def _pause_writes_of(conn: psycopg.Connection[Any], schema: str, stream: str, key: int) -> None:
    """A trigger that holds any insert of ``stream``'s events until advisory lock ``(key, 1)`` is free."""
    conn.execute(
        f'CREATE FUNCTION "{schema}".pause_writer() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN '
        "PERFORM set_config('lock_timeout', '0', true); "
        f"PERFORM pg_advisory_lock_shared({key}, 1); PERFORM pg_advisory_unlock_shared({key}, 1); "
        "RETURN NEW; END $$"
    )
    conn.execute(
        f'CREATE TRIGGER pause_writer BEFORE INSERT ON "{schema}".contextledger_events FOR EACH ROW '
        f"WHEN (NEW.originator_id = '{stream}') EXECUTE FUNCTION \"{schema}\".pause_writer()"
    )


def _wait_until_blocked(conn: psycopg.Connection[Any], key: int) -> None:
    deadline = time.monotonic() + 60
    while not conn.execute(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND classid = %s::oid "
        "AND objid = 1 AND objsubid = 2",
        (key & 0xFFFFFFFF,),
    ).fetchone()[0]:  # type: ignore[index]
        assert time.monotonic() < deadline, "the slow writer never reached its insert"
        time.sleep(0.01)


def test_a_writer_of_another_session_commits_while_one_is_in_flight_and_readers_wait_for_the_first(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session's append commits while another session's transaction is still open (no table lock).

    Its event has the higher notification id, so readers hold it back (never skipping the open one's id)
    until the first commits; then both come, in id order. Before, the second writer waited for the
    EXCLUSIVE table lock until ``lock_timeout`` and failed with ``StoreUnavailableError``.
    """
    monkeypatch.setattr(postgres_horizon, "HORIZON_WAIT", 0.2)
    schema = pg_url.partition("?schema=")[2]
    key = zlib.crc32(schema.encode()) & 0x7FFFFFFF
    with (
        contextledger.open_ledger(pg_url) as ledger,
        contextledger.open_ledger(pg_url) as other,  # a second writer: one Ledger appends one at a time
        psycopg.connect(PG_BASE.split("?")[0], autocommit=True) as conn,
    ):
        slow, fast = ledger.start_session(session_id="slow"), ledger.start_session(session_id="fast")
        _views, reader = store_views(ledger)
        before = reader.head()
        _pause_writes_of(conn, schema, slow, key)
        conn.execute("SELECT pg_advisory_lock(%s, 1)", (key,))
        slow_append = threading.Thread(target=other.add_user_message, args=(slow, "slow one"))
        slow_append.start()
        try:
            _wait_until_blocked(conn, key)
            assert ledger.add_user_message(fast, "fast one") == 2  # committed beside the open transaction
            assert [ledger.text(r.event.content) for r in ledger.events(fast)[1:]] == ["fast one"]
            assert reader.read_notifications(before, 10) == []  # held back: a lower id is in flight
            assert reader.head() == before
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s, 1)", (key,))
            slow_append.join(timeout=60)
        seen = reader.read_notifications(before, 10)
        assert [(n.stream_id, n.position) for n in seen] == [(slow, 2), (fast, 2)]
        assert [n.id for n in seen] == sorted(n.id for n in seen)
        assert reader.head() == seen[-1].id


def test_a_schema_4_ledger_gains_transaction_ids_and_keeps_its_events_in_order(pg_url: str) -> None:
    """A ledger written before the claim (no ``tx_id``) is migrated on open: old events first, then new."""
    schema = pg_url.partition("?schema=")[2]
    with contextledger.open_ledger(pg_url) as ledger:
        old = ledger.start_session(session_id="old")
        ledger.add_user_message(old, "before")
    with psycopg.connect(PG_BASE.split("?")[0], autocommit=True) as conn:
        conn.execute(f'ALTER TABLE "{schema}".contextledger_events DROP COLUMN tx_id')
        conn.execute(f'DROP FUNCTION IF EXISTS "{schema}".contextledger_events_claim(integer)')
        conn.execute(f"UPDATE \"{schema}\".contextledger_meta SET value = 4 WHERE key = 'schema'")
    with contextledger.open_ledger(pg_url) as ledger:
        ledger.add_user_message(old, "after")
        _views, reader = store_views(ledger)
        seen = reader.read_notifications(0, 10)
        assert [(n.stream_id, n.position) for n in seen] == [(old, 1), (old, 2), (old, 3)]
        assert [ledger.text(r.event.content) for r in ledger.events(old)[1:]] == ["before", "after"]
