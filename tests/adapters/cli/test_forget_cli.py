"""`contextledger --key-file K forget SESSION` through the console script, and the key's refusals."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import contextledger

CLI = str(Path(sys.executable).with_name("contextledger"))


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in {"CIPHER_KEY", "CONTEXTLEDGER_KEY_FILE"}}
    return subprocess.run([CLI, *args], capture_output=True, text=True, check=False, timeout=300, env=env)


def _error(done: subprocess.CompletedProcess[str]) -> str:
    return str(json.loads(done.stderr)["error"]["type"])


def test_forget_with_a_key_file_and_what_the_cli_says_after(tmp_path):
    """--key-file opens the encrypted ledger; no key: LedgerKeyError; after forget: SessionForgottenError."""
    key = tmp_path / "ledger.key"
    key.write_text(base64.b64encode(os.urandom(32)).decode())
    db = f"sqlite:///{tmp_path / 'l.db'}"
    with contextledger.open_ledger(db, key_file=str(key)) as ledger:
        gone = ledger.start_session(
            system_prompt="a prompt to erase", messages=[{"role": "user", "content": "hi"}]
        )
        kept = ledger.start_session(system_prompt="a prompt to keep")
    locked = _run("sessions", "--db", db, "--json")
    assert (locked.returncode, _error(locked)) == (1, "LedgerKeyError")
    done = _run("--key-file", str(key), "forget", gone, "--reason", "erasure request", "--db", db, "--json")
    assert done.returncode == 0, done.stderr
    tombstone = json.loads(done.stdout)
    assert (tombstone["session_id"], tombstone["reason"]) == (gone, "erasure request")
    assert "@" in tombstone["by"]  # user@host by default
    shown = _run("--key-file", str(key), "show", gone, "--db", db, "--json")
    assert (shown.returncode, _error(shown)) == (1, "SessionForgottenError")
    listed = _run("--key-file", str(key), "sessions", "--db", db, "--json")
    assert [s["session_id"] for s in json.loads(listed.stdout)["sessions"]] == [kept]
    again = _run("--key-file", str(key), "forget", gone, "--reason", "a retry", "--db", db, "--json")
    assert again.returncode == 0, (
        again.stderr
    )  # as its help says: it finishes, and reports the first tombstone
    assert json.loads(again.stdout)["reason"] == "erasure request"


def test_forget_on_a_plaintext_ledger_exits_1_and_erases_nothing(tmp_path):
    """No key, no erasure: EncryptionRequiredError, exit 1, the session still reads."""
    db = f"sqlite:///{tmp_path / 'plain.db'}"
    with contextledger.open_ledger(db) as ledger:
        session = ledger.start_session(system_prompt="plaintext")
    refused = _run("forget", session, "--reason", "r", "--db", db, "--json")
    assert (refused.returncode, _error(refused)) == (1, "EncryptionRequiredError")
    assert _run("show", session, "--db", db, "--json").returncode == 0


def test_forget_takes_the_whole_session_id_never_a_prefix(tmp_path):
    """An erasure cannot be undone: a prefix that names one session is refused (the whole id is named).

    Other commands take a unique prefix for convenience; ``forget abc`` erased whichever session began
    with ``abc``. Now it exits 1 with the whole id to give, and the session still reads.
    """
    key = tmp_path / "ledger.key"
    key.write_text(base64.b64encode(os.urandom(32)).decode())
    db = f"sqlite:///{tmp_path / 'l.db'}"
    with contextledger.open_ledger(db, key_file=str(key)) as ledger:
        session = ledger.start_session(system_prompt="a prompt to keep")
    prefix = session[: len(session) // 2]
    refused = _run("--key-file", str(key), "forget", prefix, "--reason", "r", "--db", db, "--json")
    assert (refused.returncode, _error(refused)) == (1, "ValidationError")
    assert session in json.loads(refused.stderr)["error"]["message"]
    shown = _run("--key-file", str(key), "show", session, "--db", db, "--json")
    assert shown.returncode == 0, shown.stderr
    done = _run("--key-file", str(key), "forget", session, "--reason", "r", "--db", db, "--json")
    assert done.returncode == 0, done.stderr
