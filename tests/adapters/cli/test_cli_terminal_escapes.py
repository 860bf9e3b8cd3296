"""Transcript text never drives the terminal: every human output shows control characters escaped."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import contextledger
import pytest
from contextledger.adapters.cli.terminal import UNSAFE, printable
from hypothesis import given
from hypothesis import strategies as st

CLI = str(Path(sys.executable).with_name("contextledger"))

CLEAR = "\x1b[2J\x1b[H"
TITLE = "\x1b]0;pwned\x07"
LINK = "\x1b]8;;https://evil.test\x1b\\click\x1b]8;;\x1b\\"
CSI_8BIT = "\x9b31m"
BIDI = "\u202eexe.txt"
EVIL = f"A{CLEAR}B{TITLE}C{LINK}D{CSI_8BIT}E{BIDI}F\rG\x08H"
"""Clear screen, window title, a hyperlink, an 8-bit CSI, a bidi override, a carriage return, a backspace."""

FORBIDDEN = ("\x1b", "\x9b", "\x9d", "\x07", "\u202e", "\r", "\x08")


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ) | {"COLUMNS": "2000", "TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "0"}
    env.pop("NO_COLOR", None)
    return subprocess.run([CLI, *args], cwd=cwd, capture_output=True, text=True, check=False, env=env)


def _assert_inert(done: subprocess.CompletedProcess[str], *, styled: bool = True) -> None:
    """Nothing a terminal obeys, except rich's own SGR colour codes (ESC [ ... m) when styled."""
    for stream in (done.stdout, done.stderr):
        rest = stream
        if styled:
            import re  # noqa: PLC0415

            rest = re.sub(r"\x1b\[[0-9;]*m", "", stream)
        for char in FORBIDDEN:
            assert char not in rest, (char, stream)


@pytest.fixture
def stored(tmp_path: Path) -> tuple[str, str]:
    """A SQLite ledger whose session id, prompt, model, tool names and texts carry escape sequences."""
    url = f"sqlite:///{tmp_path / 'e.db'}"
    with contextledger.open_ledger(url) as ledger:
        session = ledger.start_session(
            session_id=f"s{CLEAR}1",
            system_prompt=f"system {EVIL}",
            model=f"m{TITLE}",
            tools=[{"name": "run", "description": f"run {EVIL}"}],
        )
        ledger.add_user_message(session, f"question {EVIL}")
        ledger.add_assistant_message(
            session, f"answer {EVIL}", tool_calls=[{"id": "c1", "name": "run", "arguments": {"a": EVIL}}]
        )
        ledger.add_tool_result(session, "c1", f"output {EVIL}")
        ledger.add_assistant_message(session, f"done {EVIL}")
    return url, session


@pytest.mark.parametrize(
    "command",
    [
        ("show", "{s}"),
        ("render", "{s}", "--tokenizer", "heuristic"),
        ("sessions",),
        ("search", "{s}", "question"),
        ("why", "{s}", "question", "--tokenizer", "heuristic"),
        ("summaries", "{s}"),
        ("calls", "{s}"),
        ("simulate", "{s}", "--policy", "default", "--tokenizer", "heuristic", "--calls"),
    ],
)
def test_human_output_escapes_controls(stored, tmp_path, command):
    """show, render, sessions, search, why, summaries, calls, simulate print no raw escape sequence."""
    url, session = stored
    args = [part.replace("{s}", session) for part in command]
    done = _run(*args, "--db", url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    _assert_inert(done)


def test_show_prints_the_escaped_form(stored, tmp_path):
    r"""The escaped characters are visible as ``\x1b`` and ``\u202e``: shown, not dropped."""
    url, session = stored
    done = _run("show", session, "--db", url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "\\x1b[2J" in done.stdout
    assert "\\u202e" in done.stdout


def test_error_line_escapes_controls(tmp_path):
    """An unknown session named with escape sequences is reported on one inert line."""
    url = f"sqlite:///{tmp_path / 'n.db'}"
    contextledger.open_ledger(url).close()
    done = _run("show", f"nope{CLEAR}{TITLE}", "--db", url, cwd=tmp_path)
    assert done.returncode == 1
    _assert_inert(done, styled=False)
    assert "\\x1b[2J" in done.stderr


def test_markup_stays_text_next_to_escapes(tmp_path):
    """Rich markup around an escape is printed as the brackets it is, and the escape shown escaped."""
    url = f"sqlite:///{tmp_path / 'k.db'}"
    with contextledger.open_ledger(url) as ledger:
        session = ledger.start_session(system_prompt="s")
        ledger.add_user_message(session, f"[bold]{CLEAR}[/bold] [link=https://x.test]y[/link]")
    done = _run("show", session, "--db", url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "[bold]\\x1b[2J\\x1b[H[/bold] [link=https://x.test]y[/link]" in done.stdout
    _assert_inert(done)


@given(st.text())
def test_printable_leaves_nothing_a_terminal_obeys(text):
    """Any text: the result has no unsafe character, keeps newlines and tabs, and is idempotent."""
    shown = printable(text)
    assert UNSAFE.search(shown) is None
    assert shown.count("\n") == text.count("\n")
    assert shown.count("\t") == text.count("\t")
    assert printable(shown) == shown
    if UNSAFE.search(text) is None:
        assert shown == text
