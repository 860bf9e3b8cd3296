"""One transaction per imported file, written session by session (ADR 0041), on every backend."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import contextledger
import pytest
from contextledger.application.kernel.session_port import SessionSpec

from tests.adapters.importers.test_streaming import BAD_LAST, _tau_run


def _spec(n: int, tag: str = "") -> SessionSpec:
    return {
        "session_id": f"s{tag}{n}",
        "messages": [{"role": "user", "content": f"hello {n}"}, {"role": "assistant", "content": "hi"}],
        "idempotency_key": f"k{tag}{n}",
    }


@pytest.mark.parametrize("name", sorted(BAD_LAST))
def test_a_bad_last_session_leaves_nothing_on_any_backend(name, any_url, tmp_path):
    """Memory, SQLite (written as drawn) and PostgreSQL all roll the whole file back."""
    path = tmp_path / name
    path.write_text(BAD_LAST[name], encoding="utf-8")
    with contextledger.open_ledger(any_url) as ledger:
        outcome = contextledger.import_file(ledger, path)
        assert outcome.error is not None
        assert ledger.sessions() == []
    with contextledger.open_ledger(any_url) as reopened:
        assert reopened.sessions() == []


def test_a_file_imports_after_a_failed_attempt_in_the_same_ledger(any_url, tmp_path):
    """The rolled-back sessions leave no cached state behind: the corrected file then imports whole."""
    path = tmp_path / "runs.json"
    runs = [_tau_run(n) for n in range(3)]
    path.write_text(json.dumps([*runs, {"task_id": 9, "traj": [{"role": "x"}]}]), encoding="utf-8")
    with contextledger.open_ledger(any_url) as ledger:
        assert contextledger.import_file(ledger, path).error is not None
        path.write_text(json.dumps(runs), encoding="utf-8")
        outcome = contextledger.import_file(ledger, path)
        assert outcome.error is None
        assert [r.status for r in outcome.sessions] == ["imported"] * 3
        first = str(outcome.sessions[0].session_id)
        length = ledger.version(first)
        assert ledger.add_user_message(first, "one more") == length + 1  # rules state caught up
        again = contextledger.import_file(ledger, path)
        assert [r.status for r in again.sessions] == ["unchanged"] * 3


def test_sqlite_writes_each_session_before_drawing_the_next(sqlite_url):
    """Inside the one transaction, the rows of the sessions drawn so far are already written."""
    with contextledger.open_ledger(sqlite_url) as ledger:
        recorder: Any = ledger.ports.log.recorder  # type: ignore[attr-defined]
        seen: list[int] = []

        def specs() -> Iterator[SessionSpec]:
            for n in range(4):
                with recorder.writing() as cursor:  # joins the open transaction on this thread
                    cursor.execute(f"SELECT COUNT(*) FROM {recorder.events_table_name}")
                    seen.append(int(cursor.fetchone()[0]))
                yield _spec(n)

        ledger.start_sessions(specs())
        assert seen[0] == 0
        assert seen == sorted(seen)
        assert seen[-1] > seen[1] > 0
        assert [s.session_id for s in ledger.sessions()] == ["s0", "s1", "s2", "s3"]


@pytest.fixture(params=["any", "sqlite-in-memory"])
def each_url(
    request: pytest.FixtureRequest, any_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    """Every backend, plus SQLite's in-memory mode (which gathers instead of writing as it draws)."""
    monkeypatch.chdir(tmp_path)  # opening ``sqlite:///:memory:`` also leaves an empty file of that name
    return any_url if request.param == "any" else "sqlite:///:memory:"


def test_an_error_while_drawing_rolls_back_what_was_written(each_url):
    """Sessions written before the error are gone: ``start_sessions`` stays all-or-nothing."""
    tag = uuid.uuid4().hex[:8]  # SQLite's in-memory database outlives the ledger within a process
    with contextledger.open_ledger(each_url) as ledger:
        before = ledger.sessions()

        def specs() -> Iterator[SessionSpec]:
            yield _spec(0, tag)
            yield _spec(1, tag)
            raise contextledger.TranscriptImportError("f", "$[2]", "bad")

        with pytest.raises(contextledger.TranscriptImportError):
            ledger.start_sessions(specs())
        assert ledger.sessions() == before
        assert ledger.start_sessions([_spec(0, tag)]) == [f"s{tag}0"]
        assert len(ledger.events(f"s{tag}0")) == 3
        assert ledger.add_user_message(f"s{tag}0", "again") == 4


_KILLED = """
import os, sys
import contextledger
with contextledger.open_ledger(sys.argv[1]) as ledger:
    def specs():
        for n in range(5):
            if n == 3:
                os._exit(9)  # the process dies with two sessions written and uncommitted
            yield {"session_id": f"s{n}", "messages": [{"role": "user", "content": "x"}]}
    ledger.start_sessions(specs())
"""


def test_a_process_killed_mid_file_leaves_nothing(sqlite_url, tmp_path: Path):
    """The written but uncommitted sessions of a killed import are not in the ledger afterwards."""
    done = subprocess.run([sys.executable, "-c", _KILLED, sqlite_url], check=False, capture_output=True)
    assert done.returncode == 9, done.stderr
    with contextledger.open_ledger(sqlite_url) as ledger:
        assert ledger.sessions() == []
        assert ledger.start_sessions([_spec(1)]) == ["s1"]


def test_an_encrypted_ledger_imports_what_a_plain_one_does(transcripts, tmp_path, monkeypatch):
    """Sealing append by append (new session keys remembered after the commit) reads back the same events."""
    path = transcripts / "tau-bench__gpt-4o-airline.json"
    with contextledger.open_ledger(f"sqlite:///{tmp_path / 'plain.db'}") as plain:
        assert contextledger.import_file(plain, path).error is None
        expected = {s.session_id: plain.events(s.session_id) for s in plain.sessions()}
        texts = {
            sid: [plain.text(getattr(r.event, "content", None)) for r in rs] for sid, rs in expected.items()
        }
    monkeypatch.setenv("CIPHER_KEY", base64.b64encode(b"m" * 32).decode())
    sealed_url = f"sqlite:///{tmp_path / 'sealed.db'}"
    with contextledger.open_ledger(sealed_url) as sealed:
        assert contextledger.import_file(sealed, path).error is None
    with contextledger.open_ledger(sealed_url) as reopened:
        found = {s.session_id: reopened.events(s.session_id) for s in reopened.sessions()}
        assert found == expected
        assert {
            sid: [reopened.text(getattr(r.event, "content", None)) for r in rs] for sid, rs in found.items()
        } == texts
    assert b"reservation" not in (tmp_path / "sealed.db").read_bytes()


def test_a_file_whose_session_was_forgotten_fails_alone_and_the_others_import(tmp_path, transcripts):
    """Importing again a session that was forgotten is that file's error; the next file still imports.

    A forgotten session stays forgotten (its key is destroyed): the file is reported failed with nothing
    of it written, like any other bad file, and the command goes on with the others.
    """
    from contextledger.adapters.importers.service import import_file, import_files  # noqa: PLC0415

    key = tmp_path / "ledger.key"
    key.write_bytes(base64.b64encode(uuid.uuid4().bytes * 2))
    erased = transcripts / "swe-agent__swe-agent__test-repo-i1.traj"
    other = transcripts / "openhands-events__basic_gui_mode.json"
    url = f"sqlite:///{tmp_path / 'enc.db'}"
    with contextledger.open_ledger(url, key_file=str(key)) as ledger:
        [first] = import_file(ledger, erased).sessions
        ledger.forget(first.session_id, reason="erasure request")
    with contextledger.open_ledger(url, key_file=str(key)) as ledger:  # a later command, as the CLI runs
        again, then = import_files(ledger, [erased, other])
        assert again.error is not None
        assert "was forgotten" in str(again.error)
        assert again.sessions == []
        assert then.error is None
        assert [s.status for s in then.sessions] == ["imported"]
        assert [s.session_id for s in ledger.sessions()] == [then.sessions[0].session_id]


def test_a_session_forgotten_in_this_process_is_not_reported_unchanged(tmp_path, transcripts):
    """Forgotten, then imported again by the same ledger object: the file's error, as in a new process.

    The fork layer had cached the session's parent link, so the import's idempotency check found the old
    key, never read the session, and reported the erased session "unchanged", as if it were stored.
    """
    from contextledger.adapters.importers.service import import_file  # noqa: PLC0415

    key = tmp_path / "ledger.key"
    key.write_bytes(base64.b64encode(uuid.uuid4().bytes * 2))
    erased = transcripts / "swe-agent__swe-agent__test-repo-i1.traj"
    with contextledger.open_ledger(f"sqlite:///{tmp_path / 'enc.db'}", key_file=str(key)) as ledger:
        [first] = import_file(ledger, erased).sessions
        ledger.forget(first.session_id, reason="erasure request")
        again = import_file(ledger, erased)
        assert again.error is not None
        assert "was forgotten" in str(again.error)
        assert again.sessions == []
        assert list(ledger.sessions()) == []
