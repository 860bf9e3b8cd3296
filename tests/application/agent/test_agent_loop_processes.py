"""Processes appending to one session through the agent loop: conflicts retried, nothing lost or doubled."""

from __future__ import annotations

import subprocess
import sys

import contextledger
import pytest
from contextledger.domain.events import UserMessageAdded

PROCESSES = 3
MESSAGES = 15
WRITER = """
import sys, contextledger
url, session_id, index, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
with contextledger.open_ledger(url) as ledger:
    agent = contextledger.AgentContext(ledger, session_id)
    for n in range(count):
        for _ in range(2):  # the second is a retry: its idempotency key finds the first
            agent.add_user_message(f"p{index}-{n}", idempotency_key=f"user:{index}:{n}")
"""
"""One process: append each message under its own idempotency key, twice."""


@pytest.fixture(params=["sqlite", "postgres"])
def shared_url(request: pytest.FixtureRequest, sqlite_url: str) -> str:
    """A database several processes can open: a SQLite file or a PostgreSQL schema."""
    return str(request.getfixturevalue("pg_url")) if request.param == "postgres" else sqlite_url


def test_processes_appending_to_one_session_lose_nothing_and_store_nothing_twice(shared_url: str) -> None:
    """Every message of every process is stored once, in each process's order, whatever the interleaving."""
    with contextledger.open_ledger(shared_url) as ledger:
        session = ledger.start_session()
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, shared_url, session, str(i), str(MESSAGES)], stderr=subprocess.PIPE
        )
        for i in range(PROCESSES)
    ]
    errors = [w.communicate(timeout=120)[1].decode() for w in workers]
    assert [w.returncode for w in workers] == [0] * PROCESSES, errors
    with contextledger.open_ledger(shared_url) as ledger:
        events = [r.event for r in ledger.events(session)]
        texts = [ledger.text(e.content) for e in events if isinstance(e, UserMessageAdded)]
    assert len(texts) == PROCESSES * MESSAGES
    for index in range(PROCESSES):
        assert [t for t in texts if t.startswith(f"p{index}-")] == [f"p{index}-{n}" for n in range(MESSAGES)]
