"""Pathological transcript files (nesting past the decoder, past MAX_DEPTH, too large) fail alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import contextledger
import pytest
from contextledger.adapters.importers import service
from contextledger.adapters.importers.service import import_files
from contextledger.domain.limits import MAX_DEPTH

CLI = str(Path(sys.executable).with_name("contextledger"))
GOOD = "swe-agent__swe-agent__test-repo-i1.traj"


def _deep_document(path: Path, depth: int) -> Path:
    path.write_text('{"messages": ' + "[" * depth + "]" * depth + "}")
    return path


def _openai_with_arguments(path: Path, depth: int) -> Path:
    arguments = '{"a":' * (depth - 1) + "[]" + "}" * (depth - 1)
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}}
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
    ]
    path.write_text(json.dumps({"messages": messages}))
    return path


def test_cli_imports_the_good_file_and_reports_the_deep_one(transcripts, tmp_path):
    """``import deep.json good.traj`` stored nothing (RecursionError traceback); now good.traj imports.

    deep.json is reported as a TranscriptImportError naming its line, and the exit code is 1.
    """
    deep = _deep_document(tmp_path / "deep.json", 10_000)
    good = tmp_path / "good.traj"
    good.write_bytes((transcripts / GOOD).read_bytes())
    url = f"sqlite:///{tmp_path / 'l.db'}"
    done = subprocess.run(
        [CLI, "import", str(deep), str(good), "--db", url, "--json"],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    document = json.loads(done.stdout)
    assert [f["ok"] for f in document["files"]] == [False, True]
    assert document["files"][0]["error"]["type"] == "TranscriptImportError"
    assert "nested deeper than the decoder follows" in document["files"][0]["error"]["message"]
    assert document["imported"] == 1
    with contextledger.open_ledger(url) as ledger:
        (stored,) = ledger.sessions()
        assert stored.session_id == document["files"][1]["sessions"][0]["session_id"]


@pytest.mark.parametrize(
    ("name", "make", "problem"),
    [
        ("deep-document.json", lambda p: _deep_document(p, 10_000), "nested deeper than the decoder follows"),
        (
            "deep-lines.jsonl",
            lambda p: (
                p.write_text('{"role": "user", "content": "x"}\n' + "[" * 5_000 + "]" * 5_000 + "\n") and p
            ),
            "nested deeper than the decoder follows",
        ),
        ("deep-arguments.json", lambda p: _openai_with_arguments(p, 900), f"more than {MAX_DEPTH} levels"),
        (
            "limit-arguments.json",
            lambda p: _openai_with_arguments(p, MAX_DEPTH + 1),
            f"more than {MAX_DEPTH}",
        ),
    ],
)
def test_each_deep_file_fails_alone(transcripts, tmp_path, name, make, problem):
    """A file nested past the decoder or past MAX_DEPTH is one failed file; the next file still imports."""
    bad = make(tmp_path / name)
    with contextledger.open_ledger("memory://") as ledger:
        outcomes = import_files(ledger, [bad, transcripts / GOOD])
        assert [o.ok for o in outcomes] == [False, True]
        assert outcomes[0].error is not None
        assert problem in outcomes[0].error.problem
        assert len(ledger.sessions()) == 1


def test_arguments_at_the_limit_import(tmp_path):
    """Arguments exactly MAX_DEPTH deep are accepted, as in the append API."""
    with contextledger.open_ledger("memory://") as ledger:
        (outcome,) = import_files(ledger, [_openai_with_arguments(tmp_path / "ok.json", MAX_DEPTH)])
        assert outcome.ok, outcome.error


@pytest.mark.parametrize("failure", [RecursionError, MemoryError])
def test_a_parser_that_runs_out_of_stack_or_memory_fails_its_file_only(
    transcripts, tmp_path, monkeypatch, failure
):
    """RecursionError or MemoryError while parsing one file becomes that file's TranscriptImportError."""

    def exhausted(source):
        raise failure

    monkeypatch.setitem(service.PARSERS, "openhands", exhausted)
    files = [transcripts / "openhands-events__wrong_initial_state.json", transcripts / GOOD]
    with contextledger.open_ledger("memory://") as ledger:
        outcomes = import_files(ledger, files)
        assert [o.ok for o in outcomes] == [False, True]
        assert isinstance(outcomes[0].error, contextledger.TranscriptImportError)
        assert outcomes[0].error.location == "file"
        assert len(ledger.sessions()) == 1
