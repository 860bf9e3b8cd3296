"""Truncated and corrupted files of every format fail with a located TranscriptImportError, write nothing."""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path

import contextledger
from contextledger import TranscriptImportError
from contextledger.adapters.importers.service import import_file
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

CORPUS = [
    "aider__afi-core.aider.chat.history.md",
    "aider__mozgoslav.aider.chat.history.md",
    "claude-code__132b2f66-ee5f-46f6-8904-32d9dc4d36c3.jsonl",
    "mini-swe-agent__django__django-16560.traj.json",
    "openhands-events__basic_gui_mode.json",
    "openhands-events__wrong_initial_state.json",
    "swe-agent__ctf-web-i_got_id_demo.traj",
    "swe-agent__marshmallow-code__marshmallow-1867__fc-replace-from-source.traj",
    "swe-agent__swe-agent__test-repo-i1.traj",
    "tau-bench__gpt-4o-airline.json",
]
SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
_HEADER = re.compile(rb"^# aider chat started at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d[ \t\r]*$", re.MULTILINE)
_SEED = [{"role": "user", "content": "already here"}, {"role": "assistant", "content": "hello"}]


@cache
def _bytes(folder: str, name: str) -> bytes:
    return (Path(folder) / name).read_bytes()


def _snapshot(ledger: contextledger.Ledger) -> list[tuple[str, int]]:
    return [(info.session_id, info.events) for info in ledger.sessions()]


def _attempt(data: bytes, suffix: str) -> tuple[object, list[tuple[str, int]], list[tuple[str, int]]]:
    """Import ``data`` into a ledger that already holds one session; return the outcome and snapshots."""
    with tempfile.TemporaryDirectory() as folder, contextledger.open_ledger("memory://") as ledger:
        seed = Path(folder) / "seed.json"
        seed.write_text(json.dumps(_SEED), encoding="utf-8")
        assert import_file(ledger, seed).ok
        before = _snapshot(ledger)
        path = Path(folder) / f"broken{suffix}"
        path.write_bytes(data)
        outcome = import_file(ledger, path)
        return outcome, before, _snapshot(ledger)


def _truncation_is_valid(name: str, prefix: bytes, whole: bytes) -> bool:
    """Append-only formats stay valid when cut at a record boundary; one JSON document never does."""
    if name.startswith("aider"):
        try:
            prefix.decode("utf-8")
        except UnicodeDecodeError:
            return False
        return _HEADER.search(prefix) is not None
    if name.startswith("claude-code"):
        at_boundary = prefix.endswith(b"\n") or whole[len(prefix) : len(prefix) + 1] == b"\n"
        return at_boundary and len([row for row in prefix.split(b"\n") if row.strip()]) >= 2
    return False


@SETTINGS
@given(name=st.sampled_from(CORPUS), fraction=st.floats(min_value=0, max_value=1, exclude_max=True))
def test_truncated_files_fail_at_a_line_or_import_a_valid_prefix(transcripts, name, fraction):
    """A cut inside a record is a TranscriptImportError naming a line, and the store keeps its sessions."""
    whole = _bytes(str(transcripts), name)
    prefix = whole[: int(len(whole.rstrip()) * fraction)]
    outcome, before, after = _attempt(prefix, Path(name).suffix)
    if _truncation_is_valid(name, prefix, whole):
        assert outcome.ok, outcome.error
        return
    assert isinstance(outcome.error, TranscriptImportError)
    assert outcome.error.path.endswith(Path(name).suffix)
    found = re.match(r"line (\d+)", outcome.error.location)
    if prefix.strip():
        assert found, outcome.error
        assert int(found.group(1)) <= prefix.count(b"\n") + 1
    assert outcome.error.problem
    assert after == before


@SETTINGS
@given(name=st.sampled_from(CORPUS), where=st.floats(min_value=0, max_value=1, exclude_max=True))
def test_an_undecodable_byte_is_reported_at_its_line(transcripts, name, where):
    """A byte that is not UTF-8 anywhere in any format fails at exactly that line; nothing is written."""
    whole = _bytes(str(transcripts), name)
    position = int(len(whole) * where)
    corrupt = whole[:position] + b"\xff" + whole[position + 1 :]
    outcome, before, after = _attempt(corrupt, Path(name).suffix)
    assert isinstance(outcome.error, TranscriptImportError)
    line = whole[:position].count(b"\n") + 1
    assert outcome.error.location.startswith(f"line {line}, column ")
    assert after == before


def _json_mutations() -> dict[str, Callable[[object, int], str]]:
    """Per JSON file: break one required field of the record chosen by ``k``; return its JSON path."""

    def tau(doc, k):
        run = k % len(doc)
        step = k % len(doc[run]["traj"])
        doc[run]["traj"][step]["role"] = "robot"
        return f"$[{run}].traj[{step}].role"

    def mini(doc, k):
        index = k % len(doc["messages"])
        doc["messages"][index]["content"] = 7
        return f"$.messages[{index}].content"

    def swe(doc, k):
        index = k % len(doc["history"])
        doc["history"][index]["role"] = 5
        return f"$.history[{index}].role"

    def openhands(doc, k):
        index = k % len(doc)
        doc[index]["id"] = "seven"
        return f"$[{index}].id"

    return {
        "tau-bench__gpt-4o-airline.json": tau,
        "mini-swe-agent__django__django-16560.traj.json": mini,
        "swe-agent__swe-agent__test-repo-i1.traj": swe,
        "swe-agent__marshmallow-code__marshmallow-1867__fc-replace-from-source.traj": swe,
        "openhands-events__basic_gui_mode.json": openhands,
    }


@SETTINGS
@given(name=st.sampled_from(sorted(_json_mutations())), k=st.integers(min_value=0, max_value=10_000))
def test_a_broken_field_is_reported_by_json_path_and_nothing_is_written(transcripts, name, k):
    """Valid JSON with one ill-typed required field fails at that field's JSON path, before any write."""
    doc = json.loads(_bytes(str(transcripts), name))
    path = _json_mutations()[name](doc, k)
    outcome, before, after = _attempt(json.dumps(doc).encode(), Path(name).suffix)
    assert isinstance(outcome.error, TranscriptImportError)
    assert outcome.error.location == path
    assert after == before


@SETTINGS
@given(k=st.integers(min_value=0, max_value=10_000))
def test_a_broken_claude_code_line_is_reported_by_line_and_path(transcripts, k):
    """A user or assistant line whose content is not text or blocks fails at 'line N: $.message.content'."""
    name = "claude-code__132b2f66-ee5f-46f6-8904-32d9dc4d36c3.jsonl"
    lines = _bytes(str(transcripts), name).decode("utf-8").split("\n")
    candidates = [
        i for i, line in enumerate(lines) if line and json.loads(line)["type"] in {"user", "assistant"}
    ]
    index = candidates[k % len(candidates)]
    record = json.loads(lines[index])
    record["message"]["content"] = 7
    lines[index] = json.dumps(record)
    outcome, before, after = _attempt("\n".join(lines).encode(), ".jsonl")
    assert isinstance(outcome.error, TranscriptImportError)
    assert outcome.error.location == f"line {index + 1}: $.message.content"
    assert after == before


def test_a_bad_last_run_keeps_the_first_199_tau_bench_runs_out(transcripts):
    """Every session of a file is validated before the first is written: run 200 breaks, none is stored."""
    doc = json.loads(_bytes(str(transcripts), "tau-bench__gpt-4o-airline.json"))
    doc[-1]["traj"][-1] = {"role": "tool", "content": "no call id"}
    outcome, before, after = _attempt(json.dumps(doc).encode(), ".json")
    assert isinstance(outcome.error, TranscriptImportError)
    assert outcome.error.location == f"$[199].traj[{len(doc[-1]['traj']) - 1}]"
    assert "tool_call_id" in outcome.error.problem
    assert after == before


def test_content_before_the_first_aider_header_is_refused(transcripts):
    """An Aider history must start with its session header; stray text names its line."""
    whole = _bytes(str(transcripts), "aider__afi-core.aider.chat.history.md")
    outcome, before, after = _attempt(b"stray text\n" + whole, ".md")
    assert isinstance(outcome.error, TranscriptImportError)
    assert outcome.error.location == "line 1"
    assert after == before
