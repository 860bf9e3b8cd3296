"""Streamed import (ADR 0041): the same ledgers as the whole-file import stored, and nothing of a bad file."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import contextledger
import pytest
from contextledger.adapters.importers.source import Source
from hypothesis import given, settings
from hypothesis import strategies as st

GOLDEN = Path(__file__).with_name("golden_ledgers.json")
"""Digests of the SQLite ledgers the whole-file import (main at 20cdd40, before ADR 0041) stored.

The Claude Code fixture's since ADR 0088: its assistant messages keep their signed thinking blocks."""


def _chat(n: int) -> dict[str, Any]:
    return {
        "id": f"chat-{n}",
        "model": "gpt-4o",
        "tools": [{"type": "function", "function": {"name": "calc", "parameters": {"type": "object"}}}],
        "messages": [
            {"role": "system", "content": f"system {n}"},
            {"role": "user", "content": f"question {n}"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": f"c{n}", "function": {"name": "calc", "arguments": '{"x": 1}'}}],
            },
            {"role": "tool", "tool_call_id": f"c{n}", "content": str(n)},
            {"role": "assistant", "content": f"answer {n} \u00e9\u4e2d"},
        ],
    }


def _request(n: int) -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4",
        "system": f"system {n}",
        "tools": [{"name": "calc", "input_schema": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": f"question {n}"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{n}", "name": "calc", "input": {}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": "1"}]},
            {"role": "assistant", "content": [{"type": "text", "text": f"answer {n}"}]},
        ],
    }


def _lines(values: list[Any]) -> str:
    return "".join(json.dumps(v) + "\n" for v in values)


SYNTHETIC: dict[str, str] = {
    "openai-array-of-chats.json": json.dumps([_chat(n) for n in range(5)]),
    "openai-array-of-messages.json": json.dumps(_chat(7)["messages"]),
    "openai-chats.jsonl": _lines([_chat(n) for n in range(5)]),
    "openai-messages.jsonl": _lines(_chat(8)["messages"]),
    "anthropic-array-of-requests.json": json.dumps([_request(n) for n in range(4)]),
    "anthropic-requests.jsonl": _lines([_request(n) for n in range(4)]),
    "anthropic-request.json": json.dumps(_request(9)),
}
"""Multi-session shapes the fixture folder has no real file of (OpenAI and Anthropic logs)."""


def ledger_digest(path: str, db: Path) -> str:
    """Import ``path`` (as given) into a new SQLite ledger; return the sha256 of every stored table row."""
    with contextledger.open_ledger(f"sqlite:///{db}") as ledger:
        outcome = contextledger.import_file(ledger, path)
        assert outcome.error is None, outcome.error
    digest = hashlib.sha256()
    with sqlite3.connect(db) as connection:
        tables = connection.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")
        for (name,) in tables.fetchall():
            for row in connection.execute(f"SELECT * FROM {name} ORDER BY 1, 2"):
                digest.update(repr(row).encode())
    return digest.hexdigest()


def test_every_format_stores_the_same_ledger_as_the_whole_file_import(transcripts, tmp_path, monkeypatch):
    """Each fixture file and synthetic multi-session shape stores the rows the whole-file import stored."""
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert all_digests(transcripts, tmp_path, monkeypatch.chdir) == golden


def all_digests(transcripts: Path, tmp_path: Path, chdir: Any) -> dict[str, str]:
    """The ledger digest of every fixture file and every ``SYNTHETIC`` file, by file name."""
    files, dbs = tmp_path / "files", tmp_path / "dbs"
    files.mkdir()
    dbs.mkdir()
    for name, text in SYNTHETIC.items():
        (files / name).write_text(text, encoding="utf-8")
    found: dict[str, str] = {}
    for folder in (transcripts, files):
        chdir(folder)  # the source path is stored as given: relative names keep the digests stable
        for path in sorted(folder.iterdir()):
            if path.suffix != ".md":
                found[path.name] = ledger_digest(path.name, dbs / f"{path.name}.db")
    return found


def _tau_run(n: int) -> dict[str, Any]:
    return {"task_id": n, "trial": 0, "reward": 1.0, "traj": _chat(n)["messages"]}


BAD_LAST: dict[str, str] = {
    "tau-bench.json": json.dumps([_tau_run(n) for n in range(4)] + [{"task_id": 9, "traj": [{"role": "x"}]}]),
    "openai-array.json": json.dumps([_chat(n) for n in range(4)] + [{"messages": [{"role": "tool"}]}]),
    "openai.jsonl": _lines([_chat(n) for n in range(4)] + [{"messages": [{"role": "nobody"}]}]),
    "anthropic-array.json": json.dumps([_request(n) for n in range(4)] + [{"messages": [{"role": "x"}]}]),
    "anthropic.jsonl": _lines([_request(n) for n in range(4)] + [{"messages": 3}]),
}
"""Files whose first sessions are valid and whose last one is not."""


@pytest.mark.parametrize("name", sorted(BAD_LAST))
def test_a_bad_session_late_in_a_file_leaves_nothing_written(name, tmp_path, ledger):
    """The sessions before the bad one were validated and staged, yet none of them is stored."""
    path = tmp_path / name
    path.write_text(BAD_LAST[name], encoding="utf-8")
    outcome = contextledger.import_file(ledger, path)
    assert outcome.error is not None
    assert outcome.error.location.startswith(("$[4]", "line 5"))
    assert ledger.sessions() == []


def test_a_late_fault_in_a_streamed_array_is_reported_where_the_whole_document_reports_it(tmp_path):
    """Bad UTF-8 or bad syntax late in an array fails before any element is used, located as before."""
    good = json.dumps([_tau_run(n) for n in range(3)]).encode()
    for data in (good[:-1] + b',{"task_id": "\xff"}]', good[:-1] + b", {oops}]", good[:-1]):
        streamed, whole = Source("f.json", data), Source("f.json", data)
        with pytest.raises(contextledger.TranscriptImportError) as expected:
            whole.document  # noqa: B018 - the whole-document decode's report
        with pytest.raises(contextledger.TranscriptImportError) as found:
            streamed.elements  # noqa: B018
        assert (found.value.location, found.value.problem) == (
            expected.value.location,
            expected.value.problem,
        )


def test_an_array_is_decoded_one_element_at_a_time(tmp_path):
    """Parsing a tau-bench array never decodes the whole document (the peak-memory bound relies on it)."""
    path = tmp_path / "runs.json"
    path.write_text(json.dumps([_tau_run(n) for n in range(3)]), encoding="utf-8")
    source = Source.read(path)
    from contextledger.adapters.importers.openai_chat import parse_tau_bench  # noqa: PLC0415

    drafts = list(parse_tau_bench(source))
    assert [d.native_id for d in drafts] == ["task0-trial0", "task1-trial0", "task2-trial0"]
    assert "document" not in source.__dict__  # the cached whole-document decode was never made


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(blacklist_categories=("Cs",))),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(["traj", "role", "k", "é"]), inner)
    ),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(values=st.lists(_JSON, max_size=6), pad=st.sampled_from(["", " ", "\n", " \r\n\t"]))
def test_streamed_elements_equal_the_whole_document(values, pad):
    """Decoding ``elements`` one by one gives ``document``; the shape checks agree with the whole list."""
    data = (pad + json.dumps(values, ensure_ascii=False, indent=1 if pad else None) + pad).encode()
    source = Source("f.json", data)
    assert source.is_array
    assert [source.element(raw) for raw in source.elements] == values
    for key in ("traj", "role"):
        assert source.all_objects_with(key) == all(isinstance(v, dict) and key in v for v in values)


def _split_judgement(data: bytes) -> bool:
    """JSON Lines as judged before (the file split at its first 64 newlines, the first row decoded)."""
    rows = [raw for raw in data.split(b"\n", 64) if raw.strip()]
    if len(rows) < 2:
        return False
    try:
        json.loads(rows[0])
    except (ValueError, RecursionError):
        return False
    return True


_PIECES = st.sampled_from(
    [b"", b" ", b"\t\r", b"\x0b", b"{}", b'{"a": 1}', b"[", b"]", b"1", b"x", b'"s"', b"\xff"]
)


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(st.lists(_PIECES, max_size=3).map(b"".join), max_size=80), tail=st.booleans())
def test_json_lines_are_recognized_as_the_split_judged_them(lines, tail):
    """Recognizing JSON Lines reads only the first lines (a 70 MB file was copied whole) and judges alike.

    Blank lines, more than 64 of them, values, junk and a final line with or without a newline: the
    judgement equals the one made by splitting at the first 64 newlines, whose last piece is the file's rest.
    """
    data = b"\n".join(lines) + (b"\n" if tail else b"")
    assert Source("x.jsonl", data).looks_like_json_lines() == _split_judgement(data)
