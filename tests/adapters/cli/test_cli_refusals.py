"""Bad arguments the CLI refuses in one line, exit 1, writing nothing: paths, poll intervals, budgets."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

CLI = str(Path(sys.executable).with_name("contextledger"))


def _run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in {"TTY_COMPATIBLE", "TTY_INTERACTIVE"}}
    return subprocess.run(
        [CLI, *args], capture_output=True, text=True, check=False, timeout=300, env=env, cwd=cwd
    )


@pytest.fixture
def recorded(tmp_path) -> tuple[str, str]:
    """A ledger holding the demo session: its URL and the session id."""
    db = f"sqlite:///{tmp_path / 'demo.db'}"
    done = _run("demo", "--db", db, "--json")
    assert done.returncode == 0, done.stderr
    return db, json.loads(done.stdout)["session_id"]


@pytest.mark.parametrize("where", ["missing/out", "."])
@pytest.mark.parametrize(
    "command",
    [("report", "-o"), ("simulate", "--policy", "default", "--csv"), ("export", "--otlp")],
    ids=["report", "simulate-csv", "export"],
)
def test_an_unwritable_output_is_a_user_error_in_one_line_with_nothing_left_behind(
    tmp_path, recorded, command, where
):
    """A missing folder or a directory as the output: OutputPathError, exit 1, no traceback, no stray file.

    It was a StoreError, exit 5 ("the store failed"), though the ledger was fine: the path was the user's.

    The output is written whole through a temporary beside it (``write_whole``), removed on failure.
    """
    db, session = recorded
    work = tmp_path / "work"
    work.mkdir()
    target = work / where
    name, *flags = command
    done = _run(name, session, *flags, str(target), "--db", db, "--json", cwd=work)
    assert done.returncode == 1, done.stderr
    error = json.loads(done.stderr)["error"]
    assert error["type"] == "OutputPathError"
    assert "cannot write" in error["message"]
    assert "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.rglob("*") if p.name != "demo.db" and "demo.db" not in p.name) == [
        "work"
    ]


@pytest.mark.parametrize("poll", ["-1", "0", "nan", "inf"])
def test_a_worker_poll_interval_that_is_not_a_positive_number_is_refused(tmp_path, poll):
    """``worker --poll`` takes seconds above 0: a negative, zero, NaN or infinite interval is refused."""
    done = _run("worker", "--once", "--poll", poll, "--db", f"sqlite:///{tmp_path / 'w.db'}", "--json")
    assert done.returncode == 1, done.stderr
    error = json.loads(done.stderr)["error"]
    assert (error["type"], "--poll" in error["message"]) == ("ValidationError", True)


@pytest.mark.parametrize("budget", ["0", "-5", "1"])
def test_a_demo_budget_it_cannot_render_writes_no_session(tmp_path, budget):
    """``demo --budget`` is tried on a scratch ledger first: a budget refused writes no session.

    Into a new ledger path it creates no file at all; into an existing ledger it adds no session.
    """
    db = f"sqlite:///{tmp_path / 'd.db'}"
    done = _run("demo", "--budget", budget, "--db", db, "--json")
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stderr)["error"]["type"] in {"ConfigError", "PinnedOverBudgetError"}
    assert not (tmp_path / "d.db").exists()
    assert _run("demo", "--db", db, "--json").returncode == 0
    again = _run("demo", "--budget", budget, "--db", db, "--json")
    assert again.returncode == 1, again.stderr
    listed = _run("sessions", "--db", db, "--json")
    assert len(json.loads(listed.stdout)["sessions"]) == 1


@pytest.mark.parametrize("shard", ["0/2", "3/2", "1/0", "1", "a/2", "\u0661/2"])
def test_a_shard_outside_one_to_n_is_refused_in_the_user_s_numbering(recorded, shard):
    """``rebuild --shard i/n`` needs 1 <= i <= n in plain digits; the refusal quotes what was given."""
    db, _ = recorded
    done = _run("rebuild", "--policy", "default", "--shard", shard, "--db", db, "--json")
    assert done.returncode == 1, done.stderr
    message = json.loads(done.stderr)["error"]["message"]
    assert repr(shard) in message
    assert "-1" not in message


def test_dropping_a_version_never_built_is_refused(recorded):
    """``rebuild --drop`` of a name the ledger never built exits 1 and builds nothing."""
    db, _ = recorded
    done = _run("rebuild", "--policy", "default", "--drop", "context/nothing", "--db", db, "--json")
    assert done.returncode == 1, done.stderr
    assert "no context version of this ledger" in json.loads(done.stderr)["error"]["message"]


@pytest.mark.parametrize("limit", ["0", "-1"])
def test_search_refuses_a_limit_below_one(recorded, limit):
    """``search --limit`` of 0 or less would answer "no hits" for text that is there: refused."""
    db, session = recorded
    done = _run("search", session, "money", "--limit", limit, "--db", db, "--json")
    assert done.returncode == 1, done.stderr
    assert "--limit" in json.loads(done.stderr)["error"]["message"]
    found = _run("search", session, "money", "--limit", "1", "--db", db, "--json")
    assert len(json.loads(found.stdout)["hits"]) == 1


def test_simulate_replays_a_session_named_twice_once(recorded):
    """``simulate S S`` (or S and a prefix of it) replays S once: its totals are those of ``simulate S``."""
    db, session = recorded
    once = _run("simulate", session, "--policy", "default", "--db", db, "--json")
    twice = _run("simulate", session, session[:8], "--policy", "default", "--db", db, "--json")
    assert (once.returncode, twice.returncode) == (0, 0), twice.stderr
    assert json.loads(twice.stdout)["totals"] == json.loads(once.stdout)["totals"]


@pytest.mark.parametrize("command", [("sessions",), ("demo",), ("worker", "--status")])
def test_an_empty_db_url_is_refused_rather_than_the_default_opened(tmp_path, command):
    """``--db ''`` (an unset variable in a script) is refused; it does not open or create the default file."""
    done = _run(*command, "--db", "", "--json", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "--db takes a store URL" in json.loads(done.stderr)["error"]["message"]
    assert list(tmp_path.iterdir()) == []


def test_a_file_that_is_not_a_database_is_a_store_error_not_retry_later(tmp_path):
    """A file SQLite does not take as a database exits 5 (a store error), not 3 ("unavailable, retry later").

    Retrying cannot help, and the file is left byte for byte as it was.
    """
    junk = tmp_path / "notes.db"
    junk.write_bytes(b"these are my notes, not a ledger\n" * 200)
    before = junk.read_bytes()
    done = _run("sessions", "--db", f"sqlite:///{junk}", "--json")
    assert done.returncode == 5, done.stderr
    error = json.loads(done.stderr)["error"]
    assert (error["type"], "not a SQLite database" in error["message"]) == ("StoreError", True)
    assert junk.read_bytes() == before


@pytest.mark.parametrize(
    "command",
    [
        ("sessions",),
        ("doctor",),
        ("projections",),
        ("worker", "--status"),
        ("render", "sess-1"),
        ("why", "sess-1", "x"),
        ("simulate", "--all", "--policy", "default"),
        ("rebuild", "--policy", "default"),
    ],
)
def test_a_command_on_a_ledger_file_that_does_not_exist_creates_nothing(tmp_path, command):
    """A mistyped ``--db`` path is named in one line (exit 1); no empty ledger file is left behind.

    Before, every command opened (and so created) the SQLite file: ``sessions`` listed nothing from a new
    empty ledger, and the typo left a stray ``.db`` file with its WAL beside it.
    """
    done = _run(*command, "--db", "sqlite:///agnet.db", "--json", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    error = json.loads(done.stderr)["error"]
    assert error["type"] == "LedgerNotFoundError"
    assert "agnet.db does not exist" in error["message"]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [("sessions",), ("doctor",), ("render", "sess-1")])
def test_a_command_that_reads_never_writes_a_ledgers_schema_into_another_file(tmp_path, command):
    """Another program's database, or an empty file: ``sessions`` said "0 sessions" and added 10 tables."""
    other = tmp_path / "customers.db"
    with closing(sqlite3.connect(other)) as connection:
        connection.execute("CREATE TABLE customers (name TEXT)")
        connection.commit()
    empty = tmp_path / "empty.db"
    empty.touch()
    for file in (other, empty):
        before = file.read_bytes()
        done = _run(*command, "--db", f"sqlite:///{file.name}", "--json", cwd=tmp_path)
        assert done.returncode == 1, done.stderr
        error = json.loads(done.stderr)["error"]
        assert error["type"] == "LedgerNotFoundError"
        assert "is not a contextledger ledger" in error["message"]
        assert file.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["customers.db", "empty.db"]


def test_import_and_demo_still_create_a_new_ledger(tmp_path):
    """The commands that write a session create the ledger file they are pointed at, as before."""
    done = _run("demo", "--db", "sqlite:///fresh.db", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "fresh.db").is_file()
    listed = _run("sessions", "--db", "sqlite:///fresh.db", "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)["sessions"]) == 1


@pytest.mark.parametrize("command", [("demo",), ("worker", "--once")])
def test_a_command_that_creates_a_ledger_never_writes_one_into_another_programs_database(tmp_path, command):
    """``import``/``demo --db app.db`` added a ledger's tables to an application's own database."""
    other = tmp_path / "customers.db"
    with closing(sqlite3.connect(other)) as connection:
        connection.execute("CREATE TABLE customers (name TEXT)")
        connection.commit()
    before = other.read_bytes()
    done = _run(*command, "--db", f"sqlite:///{other.name}", "--json", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    error = json.loads(done.stderr.splitlines()[-1])["error"]
    assert (error["type"], "another program's SQLite database" in error["message"]) == (
        "LedgerNotFoundError",
        True,
    )
    assert other.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["customers.db"]


@pytest.mark.parametrize("workers", ["-5", "65", "100000000"])
def test_a_rebuild_worker_count_out_of_range_is_refused_before_anything_is_written(recorded, workers):
    """``--workers -5`` ran as one; ``100000000`` built a lease name per view and worker until killed."""
    db, _ = recorded
    path = db.removeprefix("sqlite:///")
    with closing(sqlite3.connect(path)) as before:
        tables = before.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    done = _run("rebuild", "--policy", "threshold", "--workers", workers, "--db", db, "--json")
    assert done.returncode == 1, done.stderr
    error = json.loads(done.stderr)["error"]
    assert (error["type"], "--workers" in error["message"]) == ("ValidationError", True)
    with closing(sqlite3.connect(path)) as after:
        assert after.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall() == tables
