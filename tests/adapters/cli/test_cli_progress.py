"""Progress of ``simulate --all``, ``import`` of many files, ``rebuild``: on a terminal's stderr only."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

CLI = str(Path(sys.executable).with_name("contextledger"))
SMALL = (
    "swe-agent__swe-agent__test-repo-i1.traj",
    "openhands-events__basic_gui_mode.json",
    "openhands-events__wrong_initial_state.json",
)
"""Three small transcripts (each under the size that gets a bar of its own)."""


def _files(transcripts: Path) -> list[str]:
    return [str(transcripts / name) for name in SMALL]


def _on_a_terminal(*args: str) -> tuple[int, str, str]:
    """Run the CLI, stderr on a pseudo-terminal (stdout piped); return its code, stdout, what the tty saw."""
    leader, follower = pty.openpty()
    env = dict(os.environ) | {"COLUMNS": "120", "TERM": "xterm"}
    for name in ("TTY_COMPATIBLE", "TTY_INTERACTIVE", "NO_COLOR"):
        env.pop(name, None)
    with subprocess.Popen([CLI, *args], stdout=subprocess.PIPE, stderr=follower, env=env) as process:
        os.close(follower)
        seen = bytearray()
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed (Linux raises EIO)
                break
            if not chunk:
                break
            seen.extend(chunk)
        out = process.stdout.read() if process.stdout else b""
        code = process.wait(timeout=300)
    os.close(leader)
    return code, out.decode(), seen.decode(errors="replace")


def _piped(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in {"TTY_COMPATIBLE", "TTY_INTERACTIVE"}}
    return subprocess.run([CLI, *args], capture_output=True, text=True, check=False, timeout=300, env=env)


def test_import_of_many_files_shows_progress_on_a_terminal_and_nothing_when_piped(tmp_path, transcripts):
    """On a tty stderr a bar counts the files; piped, or with --json, no bar and the same stdout."""
    files = _files(transcripts)
    assert len(files) == 3
    code, out, tty = _on_a_terminal("import", *files, "--db", f"sqlite:///{tmp_path / 'a.db'}")
    assert code == 0, tty
    assert "importing" in tty
    assert "3/3" in tty or "2/3" in tty
    assert "importing" not in out
    piped = _piped("import", *files, "--db", f"sqlite:///{tmp_path / 'b.db'}")
    assert piped.returncode == 0
    assert piped.stderr == ""
    assert piped.stdout.replace(" ", "") != ""
    code, out, tty = _on_a_terminal("import", *files, "--db", f"sqlite:///{tmp_path / 'c.db'}", "--json")
    assert code == 0
    assert "importing" not in tty
    assert (
        json.loads(out)["imported"]
        == json.loads(_piped("import", *files, "--db", f"sqlite:///{tmp_path / 'd.db'}", "--json").stdout)[
            "imported"
        ]
    )


def test_simulate_all_shows_progress_on_a_terminal_and_nothing_when_piped(tmp_path, transcripts):
    """``simulate --all`` counts sessions x policies on a tty stderr; piped and --json runs print no bar."""
    db = f"sqlite:///{tmp_path / 's.db'}"
    assert _piped("import", *_files(transcripts)[:2], "--db", db).returncode == 0
    args = ("simulate", "--all", "--policy", "default", "--policy", "threshold", "--tokenizer", "heuristic")
    code, out, tty = _on_a_terminal(*args, "--db", db)
    assert code == 0, tty
    assert "simulating" in tty
    piped = _piped(*args, "--db", db)
    assert piped.returncode == 0
    assert piped.stderr == ""
    assert piped.stdout == out  # the tables are the same whether or not a bar was shown
    code, out, tty = _on_a_terminal(*args, "--db", db, "--json")
    assert code == 0
    assert "simulating" not in tty
    assert json.loads(out)["policies"] == ["default", "threshold"]


def test_rebuild_shows_progress_on_a_terminal_and_nothing_when_piped(tmp_path, transcripts):
    """``rebuild`` counts events on a tty stderr, like the other long commands; piped, stderr stays empty."""
    db = f"sqlite:///{tmp_path / 'r.db'}"
    assert _piped("import", *_files(transcripts)[:2], "--db", db).returncode == 0
    code, out, tty = _on_a_terminal("rebuild", "--policy", "default", "--budget", "16000", "--db", db)
    assert code == 0, tty
    assert "rebuild" in tty
    assert "events" in tty
    assert "not switched (add --switch)" in out
    piped = _piped("rebuild", "--policy", "threshold", "--budget", "16000", "--db", db)
    assert piped.returncode == 0, piped.stderr
    assert piped.stderr == ""
    assert "not switched (add --switch)" in piped.stdout
