"""The CLI's demo, sessions and error handling, run as a user would run them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import contextledger

CLI = str(Path(sys.executable).with_name("contextledger"))


def _run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], cwd=cwd, capture_output=True, text=True, check=False, env=env)


def test_demo_records_a_session_in_sqlite_and_prints_it(tmp_path):
    """`contextledger demo` stores a tool-using session in a SQLite file and shows every event."""
    done = _run("demo", "--db", f"sqlite:///{tmp_path / 'd.db'}", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["store_url"].startswith("sqlite:///")
    assert [e["position"] for e in shown["events"]] == list(range(1, 17))
    kinds = [e["event"]["type"] for e in shown["events"]]
    assert kinds[0] == "SessionStarted"
    assert kinds.count("ToolResultRecorded") == 6
    assert any(e["event"].get("content", {}).get("type") == "blob" for e in shown["events"])
    assert (tmp_path / "d.db").exists()
    render = shown["render"]
    assert render["policy"] == "default"
    assert render["session_id"] == shown["session_id"]
    assert render["tokens"] <= render["budget"] == 2_500
    assert render["payload"]["messages"][0]["role"] == "system"


def test_sessions_json_lists_stored_sessions(tmp_path):
    """`sessions --json` prints {"sessions": [...]} with SessionInfo's fields."""
    url = f"sqlite:///{tmp_path / 'd.db'}"
    assert _run("demo", "--db", url, "--json", cwd=tmp_path).returncode == 0
    listed = json.loads(_run("sessions", "--db", url, "--json", cwd=tmp_path).stdout)["sessions"]
    assert set(listed[0]) == {"session_id", "events", "model", "started_at", "source", "parent"}
    assert listed[0]["events"] == 16
    assert listed[0]["model"] == "gpt-4o"


def test_db_defaults_to_the_environment_variable(tmp_path):
    """Without --db, CONTEXTLEDGER_DB selects the database."""
    url = f"sqlite:///{tmp_path / 'env.db'}"
    env = {"CONTEXTLEDGER_DB": url, "PATH": "/usr/bin:/bin"}
    assert _run("demo", "--db", url, "--json", cwd=tmp_path).returncode == 0
    listed = json.loads(_run("sessions", "--json", cwd=tmp_path, env=env).stdout)
    assert len(listed["sessions"]) == 1


def test_errors_print_one_line_and_exit_non_zero(tmp_path):
    """A bad database URL and a missing session each print one clear line and exit 1."""
    bad = _run("sessions", "--db", "mysql://x", cwd=tmp_path)
    assert bad.returncode == 1
    assert bad.stderr.strip().count("\n") == 0
    assert "unsupported database URL" in bad.stderr
    contextledger.open_ledger(f"sqlite:///{tmp_path / 'e.db'}").close()
    missing = _run("show", "nope", "--db", f"sqlite:///{tmp_path / 'e.db'}", cwd=tmp_path)
    assert missing.returncode == 1
    assert "SessionNotFoundError" in missing.stderr


def test_the_console_script_leaves_its_objects_to_the_exit(tmp_path):
    """By the time the exit handlers run, the CLI's objects are frozen, out of the last collections' way.

    The process still exits as any does: its output flushed, its exit code kept, handlers registered
    before ``main`` run after the freeze.
    """
    url = f"sqlite:///{tmp_path / 'l.db'}"
    contextledger.open_ledger(url).close()
    code = (
        "import atexit, gc, sys\n"
        "atexit.register(lambda: print('frozen at exit:', gc.get_freeze_count() > 0))\n"
        "from contextledger.cli import main\n"
        f"sys.argv = ['contextledger', 'sessions', '--db', {url!r}, '--json']\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    document, _, tail = done.stdout.rpartition("}")
    assert json.loads(document + "}") == {"sessions": []}
    assert tail.strip() == "frozen at exit: True"


def _plugins_variable_seen(tmp_path: Path, env: dict[str, str]) -> str:
    """What a console-script run leaves in PYDANTIC_DISABLE_PLUGINS (printed by an exit handler)."""
    url = f"sqlite:///{tmp_path / 'p.db'}"
    contextledger.open_ledger(url).close()
    code = (
        "import atexit, os, sys\n"
        "atexit.register(lambda: print('plugins:', repr(os.environ.get('PYDANTIC_DISABLE_PLUGINS'))))\n"
        "from contextledger.cli import main\n"
        f"sys.argv = ['contextledger', 'sessions', '--db', {url!r}, '--json']\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout.rpartition("plugins: ")[2].strip()


def test_the_console_script_skips_pydantic_plugins_unless_told(tmp_path):
    """The CLI does not scan every installed distribution for pydantic plugins; a value set is kept."""
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    assert _plugins_variable_seen(tmp_path, env) == "'__all__'"
    assert _plugins_variable_seen(tmp_path, {**env, "PYDANTIC_DISABLE_PLUGINS": ""}) == "''"
    assert _plugins_variable_seen(tmp_path, {**env, "PYDANTIC_DISABLE_PLUGINS": "logfire"}) == "'logfire'"
    # the library alone never touches it
    done = subprocess.run(
        [sys.executable, "-c", "import os, contextledger; print(os.environ.get('PYDANTIC_DISABLE_PLUGINS'))"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    assert done.stdout.strip() == "None"
