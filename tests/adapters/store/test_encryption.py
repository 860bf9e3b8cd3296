"""Encryption at rest and ``forget`` on every backend: what a user sees through the API.

The byte-level proofs (no plaintext in the SQLite file nor in a ``pg_dump``) are in
``test_encryption_scan.py``.
"""

from __future__ import annotations

import base64
import os

import contextledger
import pytest
from contextledger.domain.errors import (
    EncryptionRequiredError,
    IdempotencyKeyReusedError,
    InvalidMessageError,
    LedgerKeyError,
    SessionForgottenError,
    SessionNotFoundError,
)

KEY = base64.b64encode(b"m" * 32).decode()
LARGE = "a large tool output stored as a blob " * 400


@pytest.fixture
def keyed(monkeypatch):
    """The master key in the environment (as eventsourcing's CIPHER_KEY)."""
    monkeypatch.setenv("CIPHER_KEY", KEY)
    return KEY


@pytest.fixture(params=["sqlite", "postgres"])
def durable_url(request, tmp_path) -> str:
    """A backend that outlives the process: a SQLite file or a PostgreSQL schema."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ledger.db'}"
    return request.getfixturevalue("pg_url")


def _fill(ledger: contextledger.Ledger, session_id: str) -> None:
    ledger.start_session(session_id=session_id, system_prompt=f"the system prompt of {session_id}")
    ledger.add_user_message(session_id, f"hello from {session_id}", idempotency_key="k1")
    ledger.add_user_message(session_id, LARGE + session_id)


def test_an_encrypted_ledger_reads_back_what_was_written(any_url, keyed):
    """Texts, blobs, idempotent retries and the reuse check work the same with encryption on."""
    with contextledger.open_ledger(any_url) as ledger:
        _fill(ledger, "s1")
        again = ledger.add_user_message("s1", "hello from s1", idempotency_key="k1")
        with pytest.raises(IdempotencyKeyReusedError):
            ledger.add_user_message("s1", "other text", idempotency_key="k1")
        events = ledger.events("s1")
        assert again == 2
        assert events[0].event.system_prompt == "the system prompt of s1"
        assert ledger.text(events[1].event.content) == "hello from s1"
        assert ledger.text(events[2].event.content) == LARGE + "s1"
        assert [s.session_id for s in ledger.sessions()] == ["s1"]


def test_an_encrypted_ledger_is_refused_without_its_key_or_with_another(durable_url, keyed, monkeypatch):
    """No key, or a wrong key: LedgerKeyError, and nothing is written (the right key reads it all)."""
    with contextledger.open_ledger(durable_url) as ledger:
        _fill(ledger, "s1")
    monkeypatch.delenv("CIPHER_KEY")
    with pytest.raises(LedgerKeyError, match="encrypted"):
        contextledger.open_ledger(durable_url)
    monkeypatch.setenv("CIPHER_KEY", base64.b64encode(os.urandom(32)).decode())
    with pytest.raises(LedgerKeyError, match="another key"):
        contextledger.open_ledger(durable_url)
    monkeypatch.setenv("CIPHER_KEY", KEY)
    with contextledger.open_ledger(durable_url) as ledger:
        assert [(s.session_id, s.events) for s in ledger.sessions()] == [("s1", 3)]


def test_a_key_is_refused_for_a_plaintext_ledger(durable_url, monkeypatch):
    """A ledger holding plaintext events is not silently mixed with encrypted ones: LedgerKeyError."""
    monkeypatch.delenv("CIPHER_KEY", raising=False)
    with contextledger.open_ledger(durable_url) as ledger:
        _fill(ledger, "s1")
    monkeypatch.setenv("CIPHER_KEY", KEY)
    with pytest.raises(LedgerKeyError, match="plaintext"):
        contextledger.open_ledger(durable_url)


def test_forget_on_a_plaintext_ledger_is_refused_and_erases_nothing(any_url, monkeypatch):
    """Without encryption forget cannot erase while the log stays append-only: a typed refusal."""
    monkeypatch.delenv("CIPHER_KEY", raising=False)
    with contextledger.open_ledger(any_url) as ledger:
        _fill(ledger, "s1")
        with pytest.raises(EncryptionRequiredError, match="encrypted ledger"):
            ledger.forget("s1", reason="asked to")
        assert ledger.version("s1") == 3
        assert ledger.text(ledger.events("s1")[1].event.content) == "hello from s1"


def test_forget_erases_one_session_and_leaves_a_tombstone(any_url, keyed):
    """After forget, reads raise SessionForgottenError naming who and why; the rest holds.

    The session is not listed, the others are intact, appends are refused with nothing written, and
    a second forget returns the first tombstone.
    """
    with contextledger.open_ledger(any_url) as ledger:
        _fill(ledger, "gone")
        _fill(ledger, "kept")
        ledger.record_summary(
            "gone", covers_from=2, covers_through=3, text="a summary of gone", produced_at=3
        )
        tombstone = ledger.forget("gone", reason="erasure request #7", by="dpo@example.org")
        assert (tombstone.session_id, tombstone.reason, tombstone.by) == (
            "gone",
            "erasure request #7",
            "dpo@example.org",
        )
        with pytest.raises(SessionForgottenError, match=r"dpo@example.org.*erasure request #7"):
            ledger.events("gone")
        with pytest.raises(SessionForgottenError):
            ledger.summaries("gone")
        with pytest.raises(SessionForgottenError):
            ledger.add_user_message("gone", "more")
        assert ledger.version("gone") == 4  # three events and the tombstone: append-only
        assert [s.session_id for s in ledger.sessions()] == ["kept"]
        assert ledger.text(ledger.events("kept")[2].event.content) == LARGE + "kept"
        assert ledger.forget("gone", reason="again", by="x") == tombstone
        assert ledger.version("gone") == 4


def test_forget_refuses_bad_input_with_typed_errors(any_url, keyed):
    """An unknown session, an empty reason or a non-text by: typed errors, nothing written."""
    with contextledger.open_ledger(any_url) as ledger:
        _fill(ledger, "s1")
        with pytest.raises(SessionNotFoundError):
            ledger.forget("nobody", reason="r")
        with pytest.raises(InvalidMessageError, match="reason"):
            ledger.forget("s1", reason="  ")
        with pytest.raises(InvalidMessageError, match="by"):
            ledger.forget("s1", reason="r", by=5)  # type: ignore[arg-type]
        assert ledger.version("s1") == 3


def test_forget_survives_a_new_process(durable_url, keyed):
    """A forgotten session stays forgotten for a process that never cached its key."""
    with contextledger.open_ledger(durable_url) as ledger:
        _fill(ledger, "gone")
        _fill(ledger, "kept")
    with contextledger.open_ledger(durable_url) as ledger:
        ledger.forget("gone", reason="r", by="b")
    with contextledger.open_ledger(durable_url) as ledger:
        with pytest.raises(SessionForgottenError, match="by b"):
            ledger.events("gone")
        assert [s.session_id for s in ledger.sessions()] == ["kept"]


def test_a_fork_of_a_fork_of_a_forgotten_session_is_refused(keyed, tmp_path):
    """``fork`` of a fork whose parent was forgotten made a session every position of which was erased.

    The child's start repeated what it was forked from, and no command could read it.
    """
    ledger = contextledger.open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    _fill(ledger, "root")
    child = ledger.fork("root", 3, new_session_id="child")
    ledger.forget("root", reason="erasure request")
    with pytest.raises(SessionForgottenError):
        ledger.fork(child, 2)
    with pytest.raises(SessionForgottenError):
        ledger.start_session(session_id="grandchild", parent=(child, 2))
    assert "grandchild" not in {s.session_id for s in ledger.sessions()}
