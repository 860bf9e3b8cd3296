"""Ids a user can copy (issue 18, item 7): unique prefixes every command takes, tables never cut them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import contextledger
import pytest
import typer
from contextledger.adapters.cli.app import app
from contextledger.application.kernel.id_prefixes import match_prefix, short_ids
from contextledger.domain.errors import AmbiguousIdError

CLI = str(Path(sys.executable).with_name("contextledger"))

SESSION = "0f3c9a11d2e84b7c9e5f60718293a4b5"
"""The session every command is given by prefix; ``TWIN`` shares its first five characters."""
TWIN = "0f3c9bb2a1d04e6f8a7b6c5d4e3f2a10"
PREFIX = SESSION[:8]


def _ledger(url: str) -> None:
    with contextledger.open_ledger(url) as ledger:
        for session in (SESSION, TWIN):
            ledger.start_session(session_id=session, system_prompt="the system prompt")
            ledger.add_user_message(session, "remember the vault code ZETA-42")
            call = {"id": "c1", "name": "bash", "arguments": {"command": "ls"}}
            ledger.add_assistant_message(session, "looking", tool_calls=[call])
            ledger.add_tool_result(session, "c1", "file.txt\n" * 5, tool_name="bash")
            ledger.add_assistant_message(session, "noted")


def _session_commands() -> dict[str, bool]:
    """Every command with a session argument (or ``--session`` option): name -> takes several."""
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    found: dict[str, bool] = {}
    for name, command in group.commands.items():
        for param in command.params:
            if param.name in {"session_id", "session_ids"}:
                found[name] = param.name == "session_ids"
    return found


def _argv(name: str, session: str, tmp_path: Path, call_id: str) -> list[str]:
    """How each session-taking command is run with ``session`` (its other required arguments added)."""
    extra = {
        "why": [session, "ZETA-42", "--policy", "default", "--budget", "4000"],
        "fork": [session, "--at", "3"],
        "pin": [session, "3"],
        "unpin": [session, "3"],
        "export": [session, "--otlp", str(tmp_path / "spans.json")],
        "report": [session, "-o", str(tmp_path / "report.html")],
        "search": [session, "ZETA"],
        "simulate": [session, "--policy", "default"],
        "compact": [session, "--budget", "4000"],
        "replay-call": [call_id, "--session", session],
        "render": [session, "--budget", "4000", "--record"],
        "forget": [session, "--reason", "test"],
    }
    return [name, *extra.get(name, [session])]


def test_every_command_that_takes_a_session_takes_a_unique_prefix(tmp_path, run_cli):
    """Each command with a session argument, found by introspection, runs on a prefix as on the id."""
    url = f"sqlite:///{tmp_path / 'ids.db'}"
    _ledger(url)
    code, out, err = run_cli("render", PREFIX, "--record", "--db", url, "--json")
    assert code == 0, err
    call_id = json.loads(out)["call_id"]
    commands = _session_commands()
    assert {"show", "calls", "why", "render", "fork", "pin", "simulate", "replay-call"} <= set(commands)
    for name in sorted(commands, key=lambda n: (n == "unpin", n)):  # unpin after pin
        code, out, err = run_cli(*_argv(name, PREFIX, tmp_path, call_id), "--db", url, "--json")
        if name == "forget":  # the prefix resolves, and is refused: an erasure takes the whole id
            error = json.loads(err)["error"]
            assert (error["type"], SESSION in error["message"]) == ("ValidationError", True), err
            continue
        assert code == 0, f"{name}: {err}"
        document = json.loads(out)
        named = document.get("session_id") if name not in {"fork", "simulate"} else None
        assert named in {None, SESSION}, (name, named)
        if name == "fork":
            assert document["parent"] == SESSION
        if name == "simulate":
            assert document["sessions"] == [SESSION]


def test_a_call_id_prefix_replays_the_call(tmp_path, run_cli):
    """``replay-call`` takes a unique prefix of a call id, with or without its session."""
    url = f"sqlite:///{tmp_path / 'call.db'}"
    _ledger(url)
    _, out, _ = run_cli("render", SESSION, "--record", "--db", url, "--json")
    call_id = json.loads(out)["call_id"]
    for argv in (["replay-call", call_id[:13]], ["replay-call", call_id[:13], "--session", PREFIX]):
        code, out, err = run_cli(*argv, "--db", url, "--json")
        assert code == 0, err
        replayed = json.loads(out)
        assert (replayed["call_id"], replayed["session_id"], replayed["verified"]) == (call_id, SESSION, True)


def test_an_ambiguous_prefix_is_a_typed_error_listing_the_candidates(tmp_path, run_cli):
    """A prefix two sessions share exits 1 with ``AmbiguousIdError`` names both; unknown: not found."""
    url = f"sqlite:///{tmp_path / 'twins.db'}"
    _ledger(url)
    for name in ("show", "calls", "why"):
        argv = [name, SESSION[:5], *(["ZETA"] if name == "why" else []), "--db", url, "--json"]
        code, _, err = run_cli(*argv)
        assert code == 1
        error = json.loads(err)["error"]
        assert error["type"] == "AmbiguousIdError"
        assert SESSION in error["message"]
        assert TWIN in error["message"]
    code, _, err = run_cli("show", "ffff", "--db", url, "--json")
    assert code == 1
    assert json.loads(err)["error"]["type"] == "SessionNotFoundError"


def test_short_ids_are_unique_prefixes_that_resolve_back():
    """``short_ids`` keeps 8 characters, more where ids share them; each resolves to its id alone."""
    ids = [SESSION, TWIN, "0f3c9a11d2e8ffff", "abc", "swe-agent-7e41c91675def7e9", "call-9e48c9be0a1b2c3d"]
    short = short_ids(ids)
    assert short[TWIN] == TWIN[:8]
    assert short["abc"] == "abc"
    assert short["swe-agent-7e41c91675def7e9"] == "swe-agent-7e41c916"  # 8 past the label
    assert short["call-9e48c9be0a1b2c3d"] == "call-9e48c9be"
    long_label = "openhands-2025-01-20T20-29-13.519638-193c58c2"
    assert short_ids([long_label])[long_label] == "openhands-2025-01-"
    assert len(short[SESSION]) == 13  # shares 12 characters with 0f3c9a11d2e8ffff
    for full, shown in short.items():
        assert match_prefix("session", shown, ids) == full
    with pytest.raises(AmbiguousIdError) as raised:
        match_prefix("session", "0f3c9", ids)
    assert set(raised.value.candidates) == {SESSION, TWIN, "0f3c9a11d2e8ffff"}


def _id_cells(table_text: str) -> str:
    """The first column of a printed table's body, its folded lines joined (other columns may be cut)."""
    rows = [line.replace("|", "│") for line in table_text.splitlines() if line.startswith(("│", "|"))]
    return "".join(row.split("│")[1].strip() for row in rows)


@pytest.mark.parametrize("columns", ["40", "60"])
def test_tables_never_cut_a_session_or_call_id_in_a_narrow_terminal(tmp_path, columns):
    """At 40 and 60 columns, ``sessions`` and ``calls`` print each id's unique prefix whole (or folded)."""
    url = f"sqlite:///{tmp_path / 'narrow.db'}"
    _ledger(url)
    env = dict(os.environ) | {"COLUMNS": columns, "PYTHONIOENCODING": "utf-8"}

    def run(*args: str) -> str:
        done = subprocess.run(
            [CLI, *args, "--db", url], capture_output=True, text=True, check=False, timeout=300, env=env
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    recorded = json.loads(run("render", SESSION, "--record", "--json"))["call_id"]
    listed = _id_cells(run("sessions"))
    assert listed == SESSION[:8] + TWIN[:8]
    shown = _id_cells(run("calls", SESSION))
    assert "…" not in shown
    assert recorded.startswith(shown)
    assert len(shown) >= len("call-") + 8
