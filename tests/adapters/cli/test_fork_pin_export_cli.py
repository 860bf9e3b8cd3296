"""fork, pin, unpin and export --otlp through the console script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import contextledger

CLI = str(Path(sys.executable).with_name("contextledger"))


def _run(*args: str, code: int = 0) -> dict:
    done = subprocess.run([CLI, *args], capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == code, done.stderr
    return json.loads(done.stdout) if code == 0 else {"stderr": done.stderr}


def _session(url: str) -> str:
    with contextledger.open_ledger(url) as ledger:
        session = ledger.start_session(system_prompt="sys", model="gpt-4o", tools=[{"name": "read_file"}])
        ledger.add_user_message(session, "task")
        ledger.add_assistant_message(session, "look", tool_calls=[{"id": "c1", "name": "read_file"}])
        ledger.add_tool_result(session, "c1", "body of the file")
        ledger.add_user_message(session, "more")
        return session


def test_fork_pin_unpin_and_export(tmp_path):
    """Fork reads the parent's prefix; pin/unpin append events; export writes parseable OTLP JSON."""
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    common = ("--db", url, "--json")
    parent = _session(url)
    forked = _run("fork", parent, "--at", "4", *common)
    assert (forked["parent"], forked["at"], forked["from_summary"]) == (parent, 4, False)
    child = forked["session_id"]
    with contextledger.open_ledger(url) as ledger:
        assert ledger.version(child) == 4
        assert ledger.version(parent) == 5
        parent_events = ledger.events(parent)
    pinned = _run("pin", child, "4", "--reason", "needed", *common)
    assert pinned == {"session_id": child, "position": 4, "pin_position": 5}
    assert _run("unpin", child, "4", *common)["unpin_position"] == 6
    assert _run("pin", child, "2-4", *common)["pin_positions"] == [7, 8, 9]
    assert _run("unpin", child, "2-4", *common)["unpin_positions"] == [10, 11, 12]
    assert "FIRST-LAST" in _run("pin", child, "4-x", "--db", url, code=1)["stderr"]
    with contextledger.open_ledger(url) as ledger:
        assert ledger.events(parent) == parent_events  # the child's pins never touch the parent
    _run("render", parent, "--tokenizer", "heuristic", "--record", *common)
    out = tmp_path / "spans.json"
    exported = _run("export", parent, "--otlp", str(out), *common)
    assert exported["spans"] == 2
    spans = json.loads(out.read_text())["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert [s["name"] for s in spans] == [f"session {parent}", "chat gpt-4o"]
    assert "gen_ai.input.messages" not in {a["key"] for a in spans[1]["attributes"]}
    _run("export", parent, "--otlp", str(out), "--content", *common)
    call = json.loads(out.read_text())["resourceSpans"][0]["scopeSpans"][0]["spans"][1]
    messages = next(
        a["value"]["stringValue"] for a in call["attributes"] if a["key"] == "gen_ai.input.messages"
    )
    assert json.loads(messages)[-1] == {"role": "user", "parts": [{"type": "text", "content": "more"}]}


def test_errors_exit_non_zero_with_one_line(tmp_path):
    """A fork outside the parent and from a summary that does not exist are refused, nothing written."""
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    parent = _session(url)
    assert "outside" in _run("fork", parent, "--at", "9", "--db", url, code=1)["stderr"]
    assert "no summary" in _run("fork", parent, "--at", "3", "--from-summary", "--db", url, code=1)["stderr"]
    with contextledger.open_ledger(url) as ledger:
        assert [s.session_id for s in ledger.sessions()] == [parent]


def test_pin_dry_run_writes_nothing_and_a_displacing_pin_warns(tmp_path):
    """``pin --dry-run`` prints the cost only; the real pin warns on stderr what it displaced."""
    url = f"sqlite:///{tmp_path / 'pins.db'}"
    with contextledger.open_ledger(url) as ledger:
        session = ledger.start_session(system_prompt="s")
        ledger.add_user_message(session, "the task")
        ledger.add_assistant_message(session, None, tool_calls=[{"id": "c1", "name": "bash"}])
        big = ledger.add_tool_result(session, "c1", "\n".join(f"row {i} " + "x" * 40 for i in range(400)))
        for turn in range(80):
            ledger.add_user_message(session, f"turn {turn} " + "word " * 80)
            ledger.add_assistant_message(session, f"answer {turn}")
        head = ledger.version(session)
    options = ("--budget", "16000", "--tokenizer", "heuristic", "--db", url)
    dry = _run("pin", session, str(big), "--dry-run", *options, "--json")
    assert dry["dry_run"] is True
    assert "pin_position" not in dry
    assert dry["cost"]["brought_back"] == [big]
    assert dry["cost"]["displaced"]
    with contextledger.open_ledger(url) as ledger:
        assert ledger.version(session) == head
    done = subprocess.run(
        [CLI, "pin", session, str(big), *options], capture_output=True, text=True, check=False, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert f"warning: pinning {big} brings back" in done.stderr
    assert f"displaces {len(dry['cost']['displaced'])} message(s)" in done.stderr
    with contextledger.open_ledger(url) as ledger:
        assert ledger.version(session) == head + 1
