"""Several processes appending to one ledger: writers queue, conflicts stay typed, retries lose nothing.

Sizes: 4 processes x 50 appends by default, 4 x 250 with CONTEXTLEDGER_LONG=1 (the figure of issue 8).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import contextledger
import pytest

from tests.adapters.store.store_workers import open_concurrently

WORKER = Path(__file__).with_name("store_workers.py")
LONG = os.environ.get("CONTEXTLEDGER_LONG") == "1"
PROCESSES = 4
APPENDS = 250 if LONG else 50
ROUNDS = 20 if LONG else 3


def run_writers(url: str, sessions: list[str], retry: bool, folder: Path) -> list[dict]:
    """Start one writer process per session slot, release them together, return their outcomes."""
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(WORKER),
                "append",
                url,
                sessions[w % len(sessions)],
                str(APPENDS),
                "1" if retry else "0",
                str(folder),
                str(w),
            ],
        )
        for w in range(PROCESSES)
    ]
    deadline = time.monotonic() + 120
    while len(list(folder.glob("ready-*"))) < PROCESSES:
        assert all(p.poll() is None for p in procs), "a writer died before starting"
        assert time.monotonic() < deadline, "writers did not start"
        time.sleep(0.01)
    (folder / "go").touch()
    for proc in procs:
        assert proc.wait(timeout=600) == 0
    return [json.loads((folder / f"result-{w}.json").read_text()) for w in range(PROCESSES)]


def start(url: str, count: int) -> list[str]:
    """Start ``count`` sessions and return their ids."""
    with contextledger.open_ledger(url) as ledger:
        return [ledger.start_session(session_id=f"s{n}") for n in range(count)]


def messages(url: str, session_id: str) -> list[str]:
    """The texts of the session's user messages, in order."""
    with contextledger.open_ledger(url) as ledger:
        return [ledger.text(r.event.content) for r in ledger.events(session_id)[1:]]


@pytest.fixture(params=["sqlite", "postgres"])
def url(request, tmp_path) -> str:
    """A fresh SQLite file or PostgreSQL schema."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ledger.db'}"
    return request.getfixturevalue("pg_url")


@pytest.mark.parametrize("session_count", [1, 4], ids=["one-session", "four-sessions"])
def test_writers_without_retry_never_see_a_locked_database(url, session_count, tmp_path):
    """Without retries each append lands or is a typed conflict; none fails as "database is locked"."""
    sessions = start(url, session_count)
    outcomes = run_writers(url, sessions, retry=False, folder=tmp_path)
    assert [o["other"] for o in outcomes] == [[]] * PROCESSES
    assert sum(o["locked"] + o["unavailable"] for o in outcomes) == 0
    landed = sum(o["ok"] for o in outcomes)
    assert landed + sum(o["conflicts"] for o in outcomes) == PROCESSES * APPENDS
    if session_count == PROCESSES:
        assert landed == PROCESSES * APPENDS  # one session per writer: nobody can conflict
    stored = [m for s in sessions for m in messages(url, s)]
    assert len(stored) == landed == len(set(stored))


@pytest.mark.parametrize("session_count", [1, 4], ids=["one-session", "four-sessions"])
def test_writers_with_the_retry_recipe_store_every_append_exactly_once(url, session_count, tmp_path):
    """With the README's retry loop the ledger holds exactly processes x appends messages, none twice."""
    sessions = start(url, session_count)
    outcomes = run_writers(url, sessions, retry=True, folder=tmp_path)
    assert [o["other"] for o in outcomes] == [[]] * PROCESSES
    assert sum(o["locked"] + o["unavailable"] for o in outcomes) == 0
    assert sum(o["ok"] for o in outcomes) == PROCESSES * APPENDS
    stored = [m for s in sessions for m in messages(url, s)]
    assert sorted(stored) == sorted(f"{w}-{n}" for w in range(PROCESSES) for n in range(APPENDS))
    for session_id in sessions:
        per_writer: dict[str, list[int]] = {}
        for text in messages(url, session_id):
            wid, n = text.split("-")
            per_writer.setdefault(wid, []).append(int(n))
        assert all(ns == sorted(ns) for ns in per_writer.values())  # each writer's order is kept


def test_concurrent_opens_of_a_fresh_sqlite_file_all_succeed(tmp_path):
    """Four processes creating one new SQLite file at once all open it (the WAL switch waits its turn)."""
    folder = tmp_path / "runs"
    folder.mkdir()
    assert open_concurrently(f"sqlite:///{tmp_path}/r{{round}}.db", ROUNDS, folder) == []
