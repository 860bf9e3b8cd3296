"""Transcript text is data, never markup: every table prints it verbatim and never crashes on it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import contextledger
import pytest

CLI = str(Path(sys.executable).with_name("contextledger"))

INST = "<s>[INST] {prompt} [/INST]"
"""A Llama prompt template: rich reads ``[/INST]`` as a closing tag that was never opened (MarkupError)."""
PLACEHOLDER = "[no result recorded yet]"
"""Looks like a style tag: rich dropped it from table cells without a word."""
STYLED = "[bold red]alarm[/bold red] :smile: [link=https://x.test]here[/link]"
"""Markup, an emoji code and a link: all must print as the characters they are."""


def _run(*args: str, cwd: Path, tty: bool = False) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ) | {"COLUMNS": "400", "NO_COLOR": "1"} | ({"TTY_COMPATIBLE": "1"} if tty else {})
    return subprocess.run([CLI, *args], cwd=cwd, capture_output=True, text=True, check=False, env=env)


@pytest.fixture
def stored(tmp_path: Path) -> tuple[str, str]:
    """A SQLite ledger whose session, model, tool names and texts look like rich markup."""
    url = f"sqlite:///{tmp_path / 'm.db'}"
    with contextledger.open_ledger(url) as ledger:
        session = ledger.start_session(
            system_prompt=f"system {PLACEHOLDER}",
            model="[gpt-4o]",
            tools=[{"name": "run[x]", "description": "run"}],
        )
        ledger.add_user_message(session, PLACEHOLDER)
        ledger.add_assistant_message(
            session, STYLED, tool_calls=[{"id": "[c1]", "name": "run[x]", "arguments": {"a": "[b]"}}]
        )
        ledger.add_tool_result(session, "[c1]", INST)
        ledger.add_user_message(session, "[/]")
    return url, session


def test_show_prints_markup_like_text_verbatim(stored, tmp_path):
    """`show` prints a Llama template, a placeholder in brackets and markup as the text they are."""
    url, session = stored
    done = _run("show", session, "--db", url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    for text in (INST, PLACEHOLDER, STYLED, "[/]", "run[x]#[c1]", "model [gpt-4o]"):
        assert text in done.stdout, text


def test_render_table_prints_markup_like_text_verbatim(stored, tmp_path):
    """`render` (table output) shows the same texts verbatim in its message previews."""
    url, session = stored
    done = _run("render", session, "--db", url, "--tokenizer", "heuristic", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    for text in (INST, PLACEHOLDER, "[/]"):
        assert text in done.stdout, text


def test_sessions_table_prints_markup_like_model_verbatim(stored, tmp_path):
    """`sessions` prints a model name in brackets instead of swallowing it as a style."""
    url, _ = stored
    done = _run("sessions", "--db", url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "[gpt-4o]" in done.stdout


def test_import_progress_and_errors_print_file_names_verbatim(tmp_path):
    """File names that look like markup appear verbatim in the progress bar and in the error line."""
    path = tmp_path / "[bold]big [INST].json"
    messages = [
        {"role": "user", "content": PLACEHOLDER},
        {"role": "assistant", "content": INST + " " + "x" * 300_000},
    ]
    path.write_text(json.dumps(messages))
    broken = tmp_path / "[red]broken.json"
    broken.write_text("{")
    url = f"sqlite:///{tmp_path / 'i.db'}"
    done = _run("import", str(path), str(broken), "--db", url, cwd=tmp_path, tty=True)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "[bold]big [INST].json" in done.stderr
    assert f"error: {broken}: " in done.stderr
    assert "1 sessions imported" in done.stdout
