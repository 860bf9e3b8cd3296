"""Streamed import on PostgreSQL (ADR 0051): batches staged in private tables, then one append."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import contextledger
import msgspec
import psycopg
import pytest
from contextledger.domain.errors import SessionExistsError
from contextledger.testing import CountingIds, FixedClock

from tests.adapters.importers.test_import_transaction import _KILLED
from tests.adapters.importers.test_streaming import BAD_LAST, SYNTHETIC

pytestmark = pytest.mark.postgres


def _open(url: str) -> contextledger.Ledger:
    return contextledger.open_ledger(url, clock=FixedClock(), ids=CountingIds(), blob_threshold=64)


def _stored(ledger: contextledger.Ledger) -> str:
    """A digest of every session's events, as read back (blobs resolved)."""
    digest = hashlib.sha256()
    for info in sorted(ledger.sessions(), key=lambda s: s.session_id):
        for recorded in ledger.events(info.session_id):
            digest.update(b"%d " % recorded.position + msgspec.json.encode(recorded.event) + b"\n")
    return digest.hexdigest()


def _imported(url: str, path: Path) -> tuple[list[str], str]:
    with _open(url) as ledger:
        outcome = contextledger.import_file(ledger, path)
        assert outcome.error is None, outcome.error
        return [s.session_id for s in outcome.sessions], _stored(ledger)


@pytest.mark.parametrize("name", sorted(SYNTHETIC))
def test_postgres_stores_what_sqlite_stores(name, tmp_path, pg_url):
    """Each multi-session shape imports into PostgreSQL the very events (and blobs) SQLite stores."""
    path = tmp_path / name
    path.write_text(SYNTHETIC[name] * 1, encoding="utf-8")
    assert _imported(pg_url, path) == _imported(f"sqlite:///{tmp_path / 'ledger.db'}", path)


def test_a_real_transcript_imports_the_same_on_both(transcripts, tmp_path, pg_url):
    """A real multi-session file (tau-bench) and its long texts (blobs) are stored alike."""
    path = transcripts / "tau-bench__gpt-4o-airline.json"
    sessions, digest = _imported(pg_url, path)
    assert len(sessions) > 1
    assert (sessions, digest) == _imported(f"sqlite:///{tmp_path / 'ledger.db'}", path)


@pytest.mark.parametrize("name", sorted(BAD_LAST))
def test_a_bad_session_late_in_a_file_leaves_nothing_and_the_next_import_is_clean(name, tmp_path, pg_url):
    """The sessions staged before the bad one are not stored; the next import stores only its own.

    Nothing staged by the failed import is left to join the next one on the same ledger.
    """
    bad, good = tmp_path / name, tmp_path / "good.jsonl"
    bad.write_text(BAD_LAST[name], encoding="utf-8")
    good.write_text(SYNTHETIC["openai-chats.jsonl"], encoding="utf-8")
    with _open(pg_url) as ledger:
        failed = contextledger.import_file(ledger, bad)
        assert failed.error is not None
        assert ledger.sessions() == []
        outcome = contextledger.import_file(ledger, good)
        assert outcome.error is None
        assert sorted(s.session_id for s in ledger.sessions()) == sorted(
            s.session_id for s in outcome.sessions
        )
        assert len(outcome.sessions) == 5


def test_other_writers_commit_and_are_read_while_an_import_stages(pg_url):
    """Staging takes no lock: another ledger appends and reads between the import's sessions.

    A reader of the notification log then sees every event once, in order, the import's after the others'.
    """
    with _open(pg_url) as importer, contextledger.open_ledger(pg_url) as other:
        busy = other.start_session(system_prompt="busy")
        seen: list[tuple[set[str], int]] = []

        def specs() -> Any:
            for n in range(3):
                yield {"session_id": f"imp-{n}", "messages": [{"role": "user", "content": f"q{n}"}]}
                other.add_user_message(busy, f"during {n}")
                seen.append(({s.session_id for s in other.sessions()}, other.version(busy)))

        assert importer.start_sessions(specs()) == ["imp-0", "imp-1", "imp-2"]
        # each append of the other ledger committed at once; nothing of the import was in the log yet
        assert seen == [({busy}, 2), ({busy}, 3), ({busy}, 4)]
        notes = other.ports.log.recorder.select_notifications(start=1, limit=1000)
        assert len(notes) == len({(n.originator_id, n.originator_version) for n in notes}) == 4 + 3 * 2
        assert [n.id for n in notes] == sorted(n.id for n in notes)
        assert [str(n.originator_id) for n in notes][-6:] == [
            "imp-0",
            "imp-0",
            "imp-1",
            "imp-1",
            "imp-2",
            "imp-2",
        ]


def test_an_existing_session_id_refuses_the_whole_file(pg_url):
    """A session already stored stops the import: none of the file's sessions is stored."""
    with _open(pg_url) as ledger:
        ledger.start_session(session_id="imp-1", system_prompt="already here")
        specs = [{"session_id": f"imp-{n}", "system_prompt": "new"} for n in range(3)]
        with pytest.raises(SessionExistsError):
            ledger.start_sessions(specs)
        assert [s.session_id for s in ledger.sessions()] == ["imp-1"]


def test_a_process_killed_while_staging_leaves_nothing(pg_url):
    """Killed with three sessions staged, the import leaves no event, and the ledger takes the next start."""
    done = subprocess.run([sys.executable, "-c", _KILLED, pg_url], check=False, capture_output=True)
    assert done.returncode == 9, done.stderr
    with contextledger.open_ledger(pg_url) as ledger:
        assert ledger.sessions() == []
        assert ledger.start_sessions([{"session_id": "s1"}]) == ["s1"]


def test_an_encrypted_postgres_ledger_imports_what_a_plain_one_does(
    transcripts, tmp_path, pg_url, monkeypatch
):
    """Staged rows are the sealed rows: read back through the key, the sessions equal a plain import's."""
    path = transcripts / "tau-bench__gpt-4o-airline.json"
    plain = _imported(f"sqlite:///{tmp_path / 'plain.db'}", path)
    monkeypatch.setenv("CIPHER_KEY", base64.b64encode(b"m" * 32).decode())
    assert _imported(pg_url, path) == plain
    with psycopg.connect(pg_url.split("?")[0], autocommit=True) as conn:
        schema = pg_url.rsplit("schema=", 1)[1]
        rows = conn.execute(f'SELECT state FROM "{schema}".contextledger_events').fetchall()
    assert rows
    assert not any(b"reservation" in bytes(state) for (state,) in rows)
