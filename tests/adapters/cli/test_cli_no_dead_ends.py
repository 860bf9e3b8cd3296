"""A CLI without dead ends (issue 18, item 7): completion, `why` without a text, `show` with summaries."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import contextledger
import typer
from contextledger.adapters.cli.app import app

CLI = str(Path(sys.executable).with_name("contextledger"))


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ) | {"COLUMNS": "300"}
    return subprocess.run([CLI, *args], capture_output=True, text=True, check=False, timeout=300, env=env)


def _session(url: str) -> str:
    with contextledger.open_ledger(url) as ledger:
        session = ledger.start_session(system_prompt="the system prompt")
        ledger.add_user_message(session, "remember the vault code ZETA-42")
        ledger.add_assistant_message(session, "noted")
        ledger.record_summary(
            session, covers_from=2, covers_through=3, text="The user gave the code ZETA-42."
        )
        return session


def test_shell_completion_is_there():
    """Typer's completion: ``--show-completion bash`` prints the script to source."""
    done = _run("--show-completion", "bash")
    assert done.returncode == 0, done.stderr
    assert "_CONTEXTLEDGER_COMPLETE" in done.stdout


def test_why_without_a_text_is_an_error_not_a_trace_of_the_system_prompt(tmp_path):
    """An empty TEXT matches everything: it is refused (exit 1) with what to give instead."""
    url = f"sqlite:///{tmp_path / 'why.db'}"
    session = _session(url)
    done = _run("why", session, "--db", url, "--json")
    assert done.returncode == 1, done.stdout
    error = json.loads(done.stderr)["error"]
    assert error["type"] == "ValidationError"
    assert "text to trace" in error["message"]
    by_position = _run("why", session, "--position", "2", "--db", url, "--json")
    assert by_position.returncode == 0, by_position.stderr


def test_show_prints_the_summaries(tmp_path):
    """``show`` lists each summary (span, the position it applies from, its text), in text and JSON."""
    url = f"sqlite:///{tmp_path / 'show.db'}"
    session = _session(url)
    done = _run("show", session, "--db", url)
    assert done.returncode == 0, done.stderr
    assert "The user gave the code ZETA-42." in done.stdout
    assert "applies from" in done.stdout
    shown = json.loads(_run("show", session, "--db", url, "--json").stdout)
    [summary] = shown["summaries"]
    assert (summary["covers_from"], summary["covers_through"], summary["produced_at"]) == (2, 3, 4)
    assert summary["text"] == "The user gave the code ZETA-42."


def test_show_prints_the_session_state_card(tmp_path):
    """``show`` ends with the session-state card as it stands now (a shell edit is a file changed)."""
    url = f"sqlite:///{tmp_path / 'card.db'}"
    with contextledger.open_ledger(url) as ledger:
        session = ledger.start_session(system_prompt="the system prompt")
        ledger.add_user_message(session, "fix the parser")
        for i in range(3):
            command = 'sed -i "s/a/b/" src/parser.py' if i == 0 else f"cat notes{i}.txt"
            call = {"id": f"c{i}", "name": "bash", "arguments": {"command": command}}
            ledger.add_assistant_message(session, f"step {i}", tool_calls=[call])
            ledger.add_tool_result(session, f"c{i}", "output line\n" * 20)
    shown = json.loads(_run("show", session, "--db", url, "--json").stdout)
    assert shown["card"] is not None
    assert "Files changed: src/parser.py" in shown["card"]
    done = _run("show", session, "--db", url)
    assert done.returncode == 0, done.stderr
    assert "Files changed: src/parser.py" in done.stdout


def test_every_help_example_uses_only_options_its_command_has():
    """An example copied from ``--help`` runs as written: every option it names exists on that command."""
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    for name, command in group.commands.items():
        options = {opt for param in command.params for opt in getattr(param, "opts", [])}
        for line in (command.epilog or "").splitlines():
            words = line.split()
            if "contextledger" not in words:
                continue
            assert words[words.index("contextledger") + 1] == name, line
            named = {w.split("=")[0] for w in words if w.startswith("--")}
            assert named <= options, f"{name}: {sorted(named - options)} in {line!r}"


def test_demo_help_says_one_thing_about_its_database():
    """``demo`` writes its own file unless --db says otherwise; its help says that, and only that."""
    done = _run("demo", "--help")
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert "contextledger-demo.db" in text
    assert "$CONTEXTLEDGER_DB" not in text
