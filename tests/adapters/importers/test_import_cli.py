"""`contextledger import` as a user runs it: JSON reports, per-file failures, idempotency, progress."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import get_args

from contextledger.adapters.cli.import_cmd import FormatName
from contextledger.adapters.importers.service import FORMATS

CLI = str(Path(sys.executable).with_name("contextledger"))
REPORT_KEYS = {"session_id", "format", "source", "messages", "tool_calls", "tool_results", "unpaired_calls"}


def _run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], cwd=cwd, capture_output=True, text=True, check=False, env=env)


def test_a_bad_file_fails_alone_and_the_exit_code_says_so(transcripts, tmp_path):
    """Good files import; the truncated one imports nothing and names file, line, problem; exit code 1."""
    url = f"sqlite:///{tmp_path / 'l.db'}"
    broken = tmp_path / "broken.traj"
    broken.write_bytes((transcripts / "swe-agent__swe-agent__test-repo-i1.traj").read_bytes()[:5000])
    good = [
        transcripts / "openhands-events__wrong_initial_state.json",
        transcripts / "swe-agent__pydicom__pydicom-1458.traj",
    ]
    done = _run("import", str(good[0]), str(broken), str(good[1]), "--db", url, "--json", cwd=tmp_path)
    assert done.returncode == 1
    document = json.loads(done.stdout)
    assert [f["ok"] for f in document["files"]] == [True, False, True]
    assert (document["imported"], document["unchanged"], document["failed_files"]) == (2, 0, 1)
    assert document["files"][1]["error"]["type"] == "TranscriptImportError"
    reports = [report for f in document["files"] for report in f["sessions"]]
    assert [r["status"] for r in reports] == ["imported", "failed", "imported"]
    assert all(set(r) >= REPORT_KEYS for r in reports)
    first = reports[0]
    counts = (
        first["format"],
        first["messages"],
        first["tool_calls"],
        first["tool_results"],
        first["unpaired_calls"],
    )
    assert counts == ("openhands", 8, 4, 3, 1)
    assert reports[1]["source"] == str(broken)
    assert reports[1]["error"].startswith("line ")
    error = json.loads(done.stderr)["error"]
    assert (error["type"], error["exit_code"]) == ("TranscriptImportError", 1)
    assert error["message"] == f"1 of 3 files failed to import: {broken}"
    text = _run("import", str(broken), "--db", url, cwd=tmp_path)
    assert text.returncode == 1
    assert f"error: {broken}: line " in text.stderr
    assert "invalid JSON" in text.stderr
    listed = json.loads(_run("sessions", "--db", url, "--json", cwd=tmp_path).stdout)["sessions"]
    assert {s["session_id"]: s["events"] for s in listed} == {
        reports[0]["session_id"]: 9,
        reports[2]["session_id"]: 27,
    }
    assert {s["source"] for s in listed} == {"openhands", "swe-agent"}


def test_importing_again_reports_unchanged_and_show_prints_positions(transcripts, tmp_path):
    """A second import stores nothing new; `show` prints the imported history with its positions."""
    url = f"sqlite:///{tmp_path / 'l.db'}"
    path = str(transcripts / "openhands-events__basic_gui_mode.json")
    first = json.loads(_run("import", path, "--db", url, "--json", cwd=tmp_path).stdout)
    second = _run("import", path, "--db", url, "--json", cwd=tmp_path)
    assert second.returncode == 0
    assert [r["status"] for r in json.loads(second.stdout)["files"][0]["sessions"]] == ["unchanged"]
    session_id = first["files"][0]["sessions"][0]["session_id"]
    shown = json.loads(_run("show", session_id, "--db", url, "--json", cwd=tmp_path).stdout)
    assert [e["position"] for e in shown["events"]] == list(range(1, 12))
    call = shown["events"][2]["event"]["tool_calls"][0]
    assert (call["name"], call["id"]) == ("execute_bash", "toolu_01W9Z8jBctr8X2frZV9p1RYs")
    table = _run("show", session_id, "--db", url, cwd=tmp_path, env=dict(os.environ) | {"COLUMNS": "300"})
    assert "execute_bash#toolu_01W9Z8jBctr8X2frZV9p1RYs" in table.stdout


def test_large_files_show_a_progress_bar_on_stderr_unless_json(transcripts, tmp_path):
    """The tau-bench file (4 MB) draws a progress bar on a terminal's stderr; --json keeps stderr quiet."""
    env = dict(os.environ) | {"TTY_COMPATIBLE": "1"}
    path = str(transcripts / "tau-bench__gpt-4o-airline.json")
    plain = _run("import", path, "--db", f"sqlite:///{tmp_path / 'a.db'}", cwd=tmp_path, env=env)
    assert plain.returncode == 0, plain.stderr
    assert "write tau-bench__gpt-4o-airline.json" in plain.stderr
    assert "200 sessions imported" in plain.stdout
    quiet = _run("import", path, "--db", f"sqlite:///{tmp_path / 'b.db'}", "--json", cwd=tmp_path, env=env)
    assert quiet.returncode == 0
    assert quiet.stderr == ""
    assert len(json.loads(quiet.stdout)["files"][0]["sessions"]) == 200


def test_an_explicit_format_is_used_instead_of_detection(transcripts, tmp_path):
    """--format aider on a JSON file fails with a precise error instead of guessing another format."""
    path = str(transcripts / "openhands-events__basic_gui_mode.json")
    done = _run("import", path, "--format", "aider", "--db", f"sqlite:///{tmp_path / 'l.db'}", cwd=tmp_path)
    assert done.returncode == 1
    assert "line 1: expected an Aider chat history" in done.stderr


def test_format_choices_cover_every_importer():
    """The CLI's --format choices are auto plus exactly the importers the service knows."""
    assert get_args(FormatName) == ("auto", *FORMATS)
