"""The CLI contract, through the console script: -h, --version, one JSON document, JSON errors, exit codes."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import contextledger
import pytest
import typer
from contextledger.adapters.cli import common
from contextledger.adapters.cli.app import app
from contextledger.domain import errors

CLI = str(Path(sys.executable).with_name("contextledger"))
COMMANDS = sorted(str(c.name) for c in app.registered_commands)


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], cwd=cwd, capture_output=True, text=True, check=False)


def _json_error(done: subprocess.CompletedProcess[str]) -> dict[str, object]:
    """The stderr of a failed --json run: exactly one JSON object with type, message and exit code."""
    assert done.stdout == ""
    error = json.loads(done.stderr)["error"]
    assert set(error) == {"type", "message", "exit_code"}
    assert error["exit_code"] == done.returncode
    assert "\n" not in error["message"]
    return error


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory) -> tuple[str, str]:
    """A SQLite ledger holding the demo session; returns (url, session id)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('contract') / 'd.db'}"
    with contextledger.open_ledger(url) as ledger:
        session = ledger.start_session(system_prompt="s", messages=[{"role": "user", "content": "hi"}])
    return url, session


def test_the_known_commands_are_registered():
    """The contract tests below cover these commands; a new command joins them automatically."""
    assert {"demo", "sessions", "show", "import", "render"} <= set(COMMANDS)


@pytest.mark.parametrize("name", ["", *COMMANDS])
def test_dash_h_is_help_and_every_command_shows_an_example(name, tmp_path):
    """`-h` prints the same help as `--help`; each command's help has --json, --db and an example."""
    args = [name] if name else []
    short, long = _run(*args, "-h", cwd=tmp_path), _run(*args, "--help", cwd=tmp_path)
    assert short.returncode == long.returncode == 0, short.stderr
    assert short.stdout == long.stdout
    if name:
        assert "Example:" in short.stdout
        assert f"$ contextledger {name}" in short.stdout
        assert "--json" in short.stdout
        assert "--db" in short.stdout
    else:
        assert "Exit codes" in short.stdout
        assert "--version" in short.stdout


def test_every_command_declares_json_and_db_and_an_example():
    """In the app itself: every command has --json and --db options and an epilog with an example."""
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    for name in COMMANDS:
        command = group.commands[name]
        options = {opt for param in command.params for opt in getattr(param, "opts", [])}
        assert {"--json", "--db", "-h", "--help"} <= options | {"-h", "--help"}, name
        assert command.epilog is not None
        assert command.epilog.startswith("Example:"), name


def test_version_prints_the_installed_version(tmp_path):
    """`--version` prints the package version and exits 0."""
    done = _run("--version", cwd=tmp_path)
    assert done.returncode == 0
    assert done.stdout == f"contextledger {version('contextledger')}\n"


def test_every_json_output_is_one_object(demo_db, tmp_path, transcripts):
    """Each command's --json prints exactly one JSON object on stdout and nothing on stderr."""
    url, session = demo_db
    runs = {
        "sessions": ["sessions", "--db", url],
        "show": ["show", session, "--db", url],
        "render": ["render", session, "--db", url, "--tokenizer", "heuristic"],
        "import": ["import", str(transcripts / "openhands-events__basic_gui_mode.json"), "--db", url],
        "demo": ["demo", "--db", f"sqlite:///{tmp_path / 'demo.db'}"],
    }
    for name, args in runs.items():
        done = _run(*args, "--json", cwd=tmp_path)
        assert done.returncode == 0, (name, done.stderr)
        assert done.stderr == "", name
        assert isinstance(json.loads(done.stdout), dict), name


def test_a_missing_session_is_a_json_error_with_exit_code_1(demo_db, tmp_path):
    """With --json an unknown session is {"error": {"type": "SessionNotFoundError"...}} on stderr; exit 1."""
    url, _ = demo_db
    done = _run("show", "nope", "--db", url, "--json", cwd=tmp_path)
    assert done.returncode == common.EXIT_USER == 1
    error = _json_error(done)
    assert error["type"] == "SessionNotFoundError"
    assert error["message"] == "no session 'nope' in this ledger"


def test_usage_errors_exit_2_and_are_json_with_json(demo_db, tmp_path):
    """Unknown options, missing arguments and bad choices exit 2; with --json the error is JSON."""
    url, session = demo_db
    unknown = _run("sessions", "--bogus", "--json", cwd=tmp_path)
    assert unknown.returncode == common.EXIT_USAGE == 2
    assert _json_error(unknown)["type"] == "NoSuchOption"
    missing = _run("show", "--db", url, "--json", cwd=tmp_path)
    assert missing.returncode == 2
    assert _json_error(missing)["type"] == "MissingParameter"
    choice = _run("render", session, "--format", "gemini", "--json", "--db", url, cwd=tmp_path)
    assert choice.returncode == 2
    assert "'gemini' is not one of 'openai', 'anthropic'" in str(_json_error(choice)["message"])
    plain = _run("sessions", "--bogus", cwd=tmp_path)
    assert plain.returncode == 2
    assert "Usage: contextledger sessions" in plain.stderr
    assert "No such option: --bogus" in plain.stderr


def test_an_unopenable_store_exits_3(tmp_path):
    """A store that cannot be opened is StoreUnavailableError: exit 3, in text and in JSON."""
    folder = tmp_path / "a-folder.db"
    folder.mkdir()
    url = f"sqlite:///{folder}"
    done = _run("sessions", "--db", url, "--json", cwd=tmp_path)
    assert done.returncode == common.EXIT_STORE_UNAVAILABLE == 3
    assert _json_error(done)["type"] == "StoreUnavailableError"
    text = _run("sessions", "--db", url, cwd=tmp_path)
    assert text.returncode == 3
    assert text.stderr.startswith("error: StoreUnavailableError: cannot open SQLite ledger")
    assert text.stderr.count("\n") == 1


def test_an_undecodable_stored_event_exits_5(tmp_path):
    """A stored event that does not decode is EventDecodeError, a StoreError: exit 5."""
    path = tmp_path / "c.db"
    with contextledger.open_ledger(f"sqlite:///{path}") as ledger:
        session = ledger.start_session(system_prompt="s", messages=[{"role": "user", "content": "hi"}])
    with sqlite3.connect(path) as db:
        db.execute("UPDATE ledger_events SET state = x'c1c1' WHERE originator_version = 2")
    db.close()
    done = _run("show", session, "--db", f"sqlite:///{path}", "--json", cwd=tmp_path)
    assert done.returncode == common.EXIT_STORE == 5
    error = _json_error(done)
    assert error["type"] == "EventDecodeError"
    assert f"{session}@2" in str(error["message"])


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (errors.InvalidMessageError("x"), 1),
        (errors.SessionNotFoundError("s"), 1),
        (errors.ConfigError("x"), 1),
        (errors.TranscriptImportError("p", "line 1", "x"), 1),
        (errors.PinnedOverBudgetError(10, 5), 1),
        (errors.StoreUnavailableError("x"), 3),
        (errors.ProjectionLockedError("context/v", "host:1:x"), 3),
        (errors.ConcurrencyConflictError("s", 3), 4),
        (errors.StoreError("x"), 5),
        (errors.EventDecodeError("x"), 5),
        (errors.SummarizerUnavailableError("x"), 6),
        (errors.SummaryRejectedError("x"), 6),
        (KeyError("x"), 70),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, BaseException) else str(value),
)
def test_each_error_type_has_its_documented_exit_code(error, code):
    """Every error of the tree maps to a documented exit code; anything else is an internal error."""
    assert common.exit_code_for(error) == code
    assert code in dict(common.EXIT_CODES)


def test_a_bug_is_an_internal_error_named_by_its_type(capsys, monkeypatch):
    """An exception outside the error tree exits 70; with --json its type and message are JSON on stderr."""

    def broken_opener(url):
        raise KeyError(url)

    monkeypatch.setattr(common, "_opener", [])
    common.use_ledger_opener(broken_opener)
    with pytest.raises(SystemExit) as exited:
        common.main(app, ["sessions", "--db", "memory://", "--json"])
    assert exited.value.code == common.EXIT_INTERNAL == 70
    error = json.loads(capsys.readouterr().err)["error"]
    assert error == {"type": "KeyError", "message": "'memory://'", "exit_code": 70}
