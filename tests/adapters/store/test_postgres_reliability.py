"""PostgreSQL: large writes complete, every wait is bounded and typed, concurrent opens do not race."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import contextledger
import psycopg
import pytest
from contextledger.adapters.store.postgres import SCHEMA_VERSION

from tests.adapters.store.store_workers import open_concurrently
from tests.conftest import PG_BASE, require_postgres

WORKER = Path(__file__).with_name("store_workers.py")
LONG = os.environ.get("CONTEXTLEDGER_LONG") == "1"
ROUNDS = 20 if LONG else 3
HANG = 120
"""Seconds after which a write that has not returned counts as hung."""

RUNS = 20 if LONG else 5
BIG_BATCH = """
import contextledger, sys
with contextledger.open_ledger(sys.argv[1]) as ledger:
    s = ledger.start_session()
    ledger.append_many(s, [{"role": "user", "content": "u" * 4000}] * 2000)
    assert ledger.version(s) == 2001
"""

BIG_RESULT = """
import contextledger, hashlib, sys
text = ("0123456789abcdef" * 4096 + "\\n") * 763  # 50 MB
with contextledger.open_ledger(sys.argv[1]) as ledger:
    s = ledger.start_session()
    ledger.add_assistant_message(s, tool_calls=[{"id": "c1", "name": "cat", "arguments": {}}])
    ledger.add_tool_result(s, "c1", text)
    back = ledger.text(ledger.events(s)[-1].event.content)
    assert hashlib.sha256(back.encode()).digest() == hashlib.sha256(text.encode()).digest()
"""


def schema_of(url: str) -> str:
    """The schema a test URL names."""
    return url.partition("?schema=")[2]


def run_script(script: str, url: str) -> None:
    """Run ``script`` in a fresh process; a hang fails the test instead of blocking it."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", script, url], check=False, timeout=HANG, capture_output=True, text=True
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the write did not return within {HANG} s (hung)")
    assert done.returncode == 0, done.stderr[-2000:]


def test_batches_of_2000_messages_of_4000_chars_complete(pg_url):
    """The reproduction of issue 8, each run a new process (it hung in the pipeline sync in 14 of 19)."""
    for _ in range(RUNS):
        run_script(BIG_BATCH, pg_url)


def test_a_50_mb_tool_result_is_stored_and_read_back(pg_url):
    """One 50 MB tool output (a blob) is written and comes back byte for byte."""
    run_script(BIG_RESULT, pg_url)


def test_a_write_that_waits_for_a_lock_ends_in_a_typed_error_and_writes_nothing(pg_url):
    """A table lock held elsewhere ends the append after lock_timeout with StoreUnavailableError."""
    url = f"{pg_url}&lock_timeout=0.5"
    with contextledger.open_ledger(url) as ledger:
        session_id = ledger.start_session()
        outcome: list[BaseException | None] = []

        def write() -> None:
            try:
                ledger.add_user_message(session_id, "blocked")
                outcome.append(None)
            except contextledger.ContextLedgerError as error:
                outcome.append(error)

        with psycopg.connect(PG_BASE.split("?")[0]) as blocker:
            blocker.execute(f'LOCK TABLE "{schema_of(pg_url)}".contextledger_events IN EXCLUSIVE MODE')
            writer = threading.Thread(target=write)
            writer.start()
            writer.join(timeout=30)
            alive = writer.is_alive()
            blocker.rollback()
        writer.join()
        assert not alive, "the append waited past lock_timeout (eventsourcing retried it for ~50 s)"
        assert isinstance(outcome[0], contextledger.StoreUnavailableError)
        assert "lock" in str(outcome[0])
        assert ledger.version(session_id) == 1


def test_every_connection_carries_the_server_side_timeouts(pg_url):
    """statement, lock and idle-in-transaction timeouts are set on the pooled connections."""
    url = f"{pg_url}&statement_timeout=7&lock_timeout=3&idle_in_transaction_timeout=9"
    with (
        contextledger.open_ledger(url) as ledger,
        ledger.ports.log.recorder.datastore.get_connection() as conn,
    ):
        shown = {
            name: conn.execute(f"SHOW {name}").fetchone()[name]
            for name in ("statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout")
        }
    assert shown == {
        "statement_timeout": "7s",
        "lock_timeout": "3s",
        "idle_in_transaction_session_timeout": "9s",
    }


def test_a_refused_connection_fails_at_once_naming_the_cause():
    """Connection refused is reported as such, not as a pool that gave up after retrying for 10 s."""
    with pytest.raises(contextledger.StoreUnavailableError, match=r"(?i)refused") as caught:
        contextledger.open_ledger("postgresql://postgres@127.0.0.1:1/test")
    assert "pool" not in str(caught.value)


def test_an_unknown_url_option_is_a_config_error():
    """A misspelt timeout in the URL is refused rather than ignored."""
    with pytest.raises(contextledger.ConfigError, match="statment_timeout"):
        contextledger.open_ledger("postgresql://postgres@127.0.0.1:5432/test?statment_timeout=5")


def test_concurrent_opens_of_a_fresh_schema_all_succeed(tmp_path):
    """Four processes creating one new schema at once: no duplicate-key or concurrent-update failures."""
    require_postgres()
    prefix = f"t_{uuid.uuid4().hex[:8]}"
    try:
        failures = open_concurrently(f"{PG_BASE}?schema={prefix}_{{round}}", ROUNDS, tmp_path)
        assert failures == []
    finally:
        with psycopg.connect(PG_BASE, autocommit=True) as conn:
            for r in range(ROUNDS):
                conn.execute(f'DROP SCHEMA IF EXISTS "{prefix}_{r}" CASCADE')


def test_concurrent_opens_of_an_existing_schema_all_succeed(pg_url, tmp_path):
    """Four processes opening a schema that exists: no 'tuple concurrently updated'."""
    contextledger.open_ledger(pg_url).close()
    assert open_concurrently(pg_url, ROUNDS, tmp_path) == []


def test_a_schema_1_blob_table_is_migrated_to_bytes(pg_url):
    """Blobs written as text by the earlier schema are converted and still read back."""
    schema = schema_of(pg_url)
    contextledger.open_ledger(pg_url).close()
    with psycopg.connect(PG_BASE, autocommit=True) as conn:
        conn.execute(f'DROP TABLE "{schema}".contextledger_blobs, "{schema}".contextledger_meta')
        conn.execute(
            f'CREATE TABLE "{schema}".contextledger_blobs (sha256 text PRIMARY KEY, text text NOT NULL)'
        )
        conn.execute(f"INSERT INTO \"{schema}\".contextledger_blobs VALUES ('abc', 'old text é')")
    with contextledger.open_ledger(pg_url) as ledger:
        assert ledger.ports.log.read_blob("abc") == "old text é"
    with psycopg.connect(PG_BASE) as conn:
        columns = conn.execute(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = %s AND table_name = 'contextledger_blobs' ORDER BY 1",
            (schema,),
        ).fetchall()
        version = conn.execute(f'SELECT value FROM "{schema}".contextledger_meta').fetchone()
    assert columns == [("sha256", "text"), ("utf8", "bytea")]
    assert version == (SCHEMA_VERSION,)


def test_importing_a_large_transcript_completes(pg_url, tmp_path):
    """`contextledger import` of a 12+ MB file (3,000 long messages and a 4 MB tool output) stores it all."""
    messages = [
        {"role": "user" if n % 2 == 0 else "assistant", "content": f"m{n} " + "u" * 4000} for n in range(3000)
    ]
    call = {"id": "c1", "type": "function", "function": {"name": "cat", "arguments": "{}"}}
    messages += [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "x\x00" * 2_000_000},
    ]
    path = tmp_path / "big.json"
    path.write_text(json.dumps({"messages": messages}))
    assert path.stat().st_size > 12_000_000
    cli = Path(sys.executable).with_name("contextledger")
    try:
        done = subprocess.run(
            [str(cli), "import", str(path), "--db", pg_url, "--json"],
            check=False,
            timeout=HANG,
            capture_output=True,
            text=True,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the import did not return within {HANG} s (hung)")
    assert done.returncode == 0, done.stderr[-2000:]
    with contextledger.open_ledger(pg_url) as ledger:
        (session,) = ledger.sessions()
        assert session.events == 3003
        last = ledger.events(session.session_id)[-1].event.content
        assert ledger.text(last) == "x\x00" * 2_000_000
