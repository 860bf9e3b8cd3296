"""compact, worker, summaries and search through the console script, on a real transcript in SQLite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CLI = str(Path(sys.executable).with_name("contextledger"))
TRAJ = "swe-agent__marshmallow-code__marshmallow-1867__fc-replace-from-source.traj"


def _run(*args: str) -> dict:
    done = subprocess.run([CLI, *args], capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture
def imported(tmp_path, transcripts) -> tuple[str, str]:
    """The marshmallow SWE-agent session imported into a fresh SQLite ledger."""
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    _run("import", str(transcripts / TRAJ), "--db", db, "--json")
    [session] = _run("sessions", "--db", db, "--json")["sessions"]
    return db, session["session_id"]


def test_compact_then_worker_then_lineage_and_search(imported):
    """A manual compaction request is served by `worker --once`, listed by `summaries`, found by `search`."""
    db, session = imported
    common = ("--db", db, "--json")
    request = _run(
        "compact", session, "--policy", "threshold", "--budget", "16000", "--tokenizer", "heuristic", *common
    )
    assert request["request"]["trigger"] == "manual"
    assert request["request"]["covers_from"] == 2
    again = _run(
        "compact", session, "--policy", "threshold", "--budget", "16000", "--tokenizer", "heuristic", *common
    )
    assert again["request"] is None  # one open request at a time
    status = _run("worker", "--status", *common)["requests"]
    assert [r["status"] for r in status] == ["open"]
    assert _run("worker", "--once", "--tokenizer", "heuristic", *common) == {"processed": 1, "failed": 0}
    [done] = _run("worker", "--status", *common)["requests"]
    assert done["status"] == "done"
    [turn] = _run("summaries", session, *common)["compactions"]
    assert turn["summarized_through"] == request["request"]["covers_through"]
    assert turn["first_kept"] == turn["summarized_through"] + 1
    assert turn["parent"] is None
    assert 0 <= turn["fidelity"]["overall"] <= 1
    hits = _run("search", session, "marshmallow", *common)["hits"]
    assert hits
    assert any(h["summary_id"] == turn["summary_id"] for h in hits) or hits[0]["position"] >= 1
    assert _run("search", session, "no such text anywhere 42", *common)["hits"] == []
    [shown] = _run("summaries", session, "--text", *common)["summaries"]
    assert shown["summary_id"] == turn["summary_id"]
    assert shown["status"] == "current"
    assert shown["text"].startswith("## Session Summary (Compaction Round 1)")
    printed = subprocess.run(
        [CLI, "summaries", session, "--text", "--db", db],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    span = f"positions {turn['covers_from']}-{turn['summarized_through']}"
    assert f"== {turn['summary_id']}: {span}" in printed
    assert "fidelity " in printed
    assert f"Covers log {span}." in printed  # the summary states the positions it covers


def test_unknown_summarizer_is_a_user_error(imported):
    """A misspelt summarizer kind exits 1 with a typed JSON error."""
    db, session = imported
    done = subprocess.run(
        [CLI, "compact", session, "--summarizer", "gpt", "--db", db, "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert json.loads(done.stderr)["error"]["type"] == "ConfigError"


def test_a_worker_whose_every_attempt_failed_exits_6_not_0(imported):
    """The summarizer unreachable (loopback port 1): ``worker --once`` said "Processed 1 requests.", 0."""
    db, session = imported
    common = ("--db", db, "--json")
    planned = ("--policy", "threshold", "--budget", "16000", "--tokenizer", "heuristic")
    _run("compact", session, *planned, *common)
    env = {**os.environ, "OPENAI_BASE_URL": "http://127.0.0.1:1/v1", "OPENAI_API_KEY": "sk-test"}
    done = subprocess.run(
        [CLI, "worker", "--once", "--summarizer", "openai", "--tokenizer", "heuristic", *common],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env=env,
    )
    assert done.returncode == 6, done.stderr
    assert json.loads(done.stderr.splitlines()[-1])["error"]["type"] == "SummarizerUnavailableError"
    [waiting] = _run("worker", "--status", *common)["requests"]
    assert (waiting["status"], waiting["attempts"]) == ("waiting", 1)
