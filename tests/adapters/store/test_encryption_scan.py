"""The byte-level proof of encryption at rest and of ``forget``, on a SQLite file and a ``pg_dump``.

Three real transcripts are imported into an encrypted ledger, then a summary, an audited model call, a
search and a rebuilt projection are added for each session, so that every table holding session text
has rows. Every message text, tool output, system prompt and summary (12 characters or more) is then
looked for in the stored bytes: the SQLite file and its write-ahead log, or a plain ``pg_dump`` of a
database of its own (raw UTF-8 and the hex form ``bytea`` columns are dumped in).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import contextledger
import psycopg
import pytest
from contextledger.adapters.store.cipher import Keyring
from contextledger.application.audit.call_recorder import CallRecorder
from contextledger.application.render.renderer import Renderer
from contextledger.application.search.log_search import search_session
from contextledger.domain.errors import SessionForgottenError
from contextledger.projections.presets import PRESETS

from tests.conftest import PG_BASE, require_postgres

CLI = str(Path(sys.executable).with_name("contextledger"))
KEY = base64.b64encode(b"scan-test-master-key-32-bytes!!!"[:32]).decode()
FORGOTTEN = "mini-swe-agent__psf__requests-1142.traj.json"
KEPT = [
    "mini-swe-agent__pytest-dev__pytest-7490.traj.json",
    "claude-code__132b2f66-ee5f-46f6-8904-32d9dc4d36c3.jsonl",
]
RENDER = ["--policy", "threshold", "--budget", "8000", "--tokenizer", "heuristic"]
Rows = dict[str, list[tuple[object, ...]]]
"""Stored rows by kind: blobs, derived (snapshots and projection rows), events."""

PROBE = 40
"""Characters of each probe: a text's head, middle and tail (texts of 12 characters or more)."""


def _env(key: str | None = KEY) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CIPHER_KEY"}
    return env if key is None else {**env, "CIPHER_KEY": key}


def _cli(*args: str, key: str | None = KEY) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([CLI, *args], capture_output=True, env=_env(key), check=False, timeout=600)


def _texts(ledger: contextledger.Ledger, session_id: str) -> list[str]:
    """Every message text, tool output, reasoning, system prompt and summary of a session."""
    found: list[str] = []
    for recorded in ledger.events(session_id):
        event = recorded.event
        found.append(getattr(event, "system_prompt", "") or "")
        found.append(getattr(event, "reasoning", "") or "")
        content = getattr(event, "content", None)
        if content is not None:
            found.append(ledger.text(content))
    found.extend(ledger.text(s.content) for s in ledger.summaries(session_id))
    return [t for t in found if len(t.strip()) >= 12]


def _probes(texts: list[str]) -> set[bytes]:
    probes: set[bytes] = set()
    for text in texts:
        middle = max(0, len(text) // 2 - PROBE // 2)
        for part in (text[:PROBE], text[middle : middle + PROBE], text[-PROBE:]):
            if len(part.strip()) >= 12:
                probes.add(part.encode("utf-8", "surrogatepass"))
    return probes


def _hits(probes: set[bytes], data: bytes) -> list[bytes]:
    """Probes found in ``data`` as raw UTF-8 or as the hex a ``bytea`` column is dumped in."""
    lowered = data.lower()
    return [p for p in probes if p in data or p.hex().encode() in lowered]


def _populate(url: str, transcripts: Path) -> dict[str, list[str]]:
    """Import, summarize, record a call, search and rebuild; return each session's texts."""
    texts: dict[str, list[str]] = {}
    with contextledger.open_ledger(url) as ledger:
        for name in [FORGOTTEN, *KEPT]:
            report = contextledger.import_file(ledger, transcripts / name)
            assert report.ok, report.error
            for session in report.sessions:
                assert session.session_id is not None
                sid = session.session_id
                head = ledger.version(sid)
                ledger.record_summary(
                    sid, covers_from=2, covers_through=4, text=f"the summary of {name}", produced_at=head
                )
                policy = PRESETS["threshold"]
                context = Renderer(ledger, tokenizer="heuristic").render(sid, policy)
                CallRecorder(ledger).record(context, policy, payload=contextledger.to_openai(context))
                search_session(ledger, sid, "the")
                texts[name if name == FORGOTTEN else sid] = _texts(ledger, sid)
    rebuilt = _cli("rebuild", *RENDER, "--switch", "--db", url, "--json")
    assert rebuilt.returncode == 0, rebuilt.stderr.decode()[-500:]
    return texts


def _renders(url: str, sessions: list[str]) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for sid in sessions:
        done = _cli("render", sid, *RENDER, "--db", url, "--json")
        assert done.returncode == 0, done.stderr.decode()[-500:]
        out[sid] = done.stdout
    return out


# -- what every key there is decrypts -----------------------------------------------------------------


def _all_plaintext(rows: Rows) -> tuple[bytes, list[tuple[str, int]]]:
    """Everything the master key (and every data key it unwraps) decrypts; the event rows none opens."""
    keyring = Keyring(KEY)
    ciphers = [keyring.ledger]
    opened: list[bytes] = []
    for _, value in rows["blobs"]:
        raw = bytes(value) if isinstance(value, bytes | memoryview) else str(value).encode()
        try:
            sealed = base64.b64decode(raw)
        except ValueError:
            continue
        try:
            ciphers.append(keyring._make(keyring.master.decrypt(sealed)))
        except ValueError:
            with contextlib.suppress(ValueError):  # the key check and blob texts open under the ledger key
                opened.append(keyring.ledger.decrypt(sealed))
    for _, state in rows["derived"]:
        opened.append(keyring.ledger.decrypt(bytes(state)))  # type: ignore[arg-type]
    unopened: list[tuple[str, int]] = []
    for stream, position, state in rows["events"]:
        for cipher in ciphers:
            try:
                opened.append(cipher.decrypt(bytes(state)))  # type: ignore[arg-type]
                break
            except ValueError:
                continue
        else:
            unopened.append((str(stream), int(position)))  # type: ignore[call-overload]
    return b"\n".join(opened), unopened


def _rows(conn: Any, prefix: str, blob_column: str) -> Rows:
    """The stored rows that may hold session text: blobs, derived rows (snapshots, projections), events."""

    def query(sql: str) -> list[tuple[object, ...]]:
        return [tuple(row) for row in conn.execute(sql).fetchall()]

    return {
        "blobs": query(f"SELECT sha256, {blob_column} FROM {prefix}_blobs"),
        "derived": query(f"SELECT name, state FROM {prefix}_snapshots")
        + query(f"SELECT key, state FROM {prefix}_projection_rows"),
        "events": query(f"SELECT originator_id, originator_version, state FROM {prefix}_events"),
    }


def _sqlite_rows(file: Path) -> Rows:
    with sqlite3.connect(file) as conn:
        return _rows(conn, "ledger", "text")


def _postgres_rows(dsn: str) -> Rows:
    with psycopg.connect(dsn) as conn:
        return _rows(conn, "contextledger", "utf8")


def _check_forgotten(url: str, texts: dict[str, list[str]], forgotten: str, rows: Rows) -> None:
    """Only the tombstone of the forgotten session opens; none of its own texts is in what opens."""
    own = set().union(*(_probes([t]) for t in texts[FORGOTTEN]))
    others = b"\n".join(
        t.encode("utf-8", "surrogatepass") for k, v in texts.items() if k != FORGOTTEN for t in v
    )
    unique = {p for p in own if p not in others}
    assert len(unique) > 50, "the forgotten session must have texts of its own to look for"
    plaintext, unopened = _all_plaintext(rows)
    assert _hits(unique, plaintext) == []
    assert unopened, "the forgotten session's events stay in the log"
    assert {stream.partition("::")[0] for stream, _ in unopened} == {forgotten}
    with contextledger.open_ledger(url) as ledger, pytest.raises(SessionForgottenError):
        ledger.events(forgotten)


def _scenario(url: str, transcripts: Path, dump: Callable[[], bytes], rows: Callable[[], Rows]) -> None:
    """Populate, scan, forget one session, scan again with every key, render and rebuild the others."""
    texts = _populate(url, transcripts)
    every = _probes([t for v in texts.values() for t in v])
    assert len(every) > 500
    assert _hits(every, dump()) == [], "a text of the transcripts is stored in plaintext"
    with contextledger.open_ledger(url) as ledger:
        sessions = [s.session_id for s in ledger.sessions()]
    forgotten = sessions[0]  # FORGOTTEN was imported first
    kept = sessions[1:]
    before = _renders(url, kept)
    derived = [str(k) for k, _ in rows()["derived"]]
    assert [k for k in derived if _of_session(k, forgotten)], "the forgotten session had derived rows"
    done = _cli("forget", forgotten, "--reason", "erasure request", "--by", "dpo", "--db", url, "--json")
    assert done.returncode == 0, done.stderr.decode()[-500:]
    assert json.loads(done.stdout)["by"] == "dpo"
    assert _hits(every, dump()) == []
    _check_forgotten(url, texts, forgotten, rows())
    assert _renders(url, kept) == before, "the other sessions render byte-identical"
    rebuilt = _cli("rebuild", *RENDER, "--switch", "--db", url, "--json")
    assert rebuilt.returncode == 0, rebuilt.stderr.decode()[-500:]
    for sid in kept:
        served = _cli("render", sid, *RENDER, "--from-projection", "--db", url, "--json")
        assert served.returncode == 0, served.stderr.decode()[-500:]
        assert served.stdout == before[sid]
    assert not [k for k, _ in rows()["derived"] if _of_session(str(k), forgotten)]


def _of_session(key: str, session_id: str) -> bool:
    """Whether a snapshot name or projection row key is one of the session's."""
    return key == session_id or key.startswith(session_id + "/") or f"/{session_id}/" in f"/{key}/"


# -- the two backends -----------------------------------------------------------------------------------


def test_sqlite_file_holds_no_plaintext_and_forget_shreds(tmp_path, transcripts, monkeypatch):
    """SQLite: 0 plaintext hits in the file and WAL; after forget, 0 hits even with the master key."""
    monkeypatch.setenv("CIPHER_KEY", KEY)
    file = tmp_path / "scan.db"

    def dump() -> bytes:
        wal = file.with_name(file.name + "-wal")
        return file.read_bytes() + (wal.read_bytes() if wal.exists() else b"")

    _scenario(f"sqlite:///{file}", transcripts, dump, lambda: _sqlite_rows(file))


def test_the_scan_finds_plaintext_when_there_is_some(tmp_path, transcripts, monkeypatch):
    """The control: the same scan of an unencrypted ledger finds the texts (so 0 above means something)."""
    monkeypatch.delenv("CIPHER_KEY", raising=False)
    file = tmp_path / "plain.db"
    url = f"sqlite:///{file}"
    with contextledger.open_ledger(url) as ledger:
        report = contextledger.import_file(ledger, transcripts / FORGOTTEN)
        texts = _texts(ledger, report.sessions[0].session_id or "")
    wal = file.with_name(file.name + "-wal")
    data = file.read_bytes() + (wal.read_bytes() if wal.exists() else b"")
    probes = _probes(texts)
    assert len(_hits(probes, data)) > len(probes) * 0.9


@pytest.fixture
def own_database() -> Iterator[str]:
    """A PostgreSQL database of this test's own (``pg_dump`` dumps a whole database)."""
    require_postgres()
    name = f"cl_crypt_{uuid.uuid4().hex[:10]}"
    base = PG_BASE.split("?")[0]
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield base.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _pg_dump() -> str:
    found = shutil.which("pg_dump") or next(
        iter(sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_dump"))), None
    )
    if found is None:
        pytest.skip("pg_dump is not installed")
    return str(found)


def test_pg_dump_holds_no_plaintext_and_forget_shreds(own_database, transcripts, monkeypatch):
    """PostgreSQL: 0 plaintext hits in a pg_dump; after forget, 0 hits even with the master key."""
    monkeypatch.setenv("CIPHER_KEY", KEY)
    pg_dump = _pg_dump()

    def dump() -> bytes:
        done = subprocess.run(
            [pg_dump, "--dbname", own_database], capture_output=True, check=True, timeout=600
        )
        return done.stdout

    _scenario(own_database, transcripts, dump, lambda: _postgres_rows(own_database))
