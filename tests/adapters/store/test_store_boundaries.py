"""What every backend stores alike (NUL in texts and names) and how a SQLite URL names its file."""

from __future__ import annotations

import hashlib
import os

import contextledger
import pytest
from contextledger.domain.content import BlobText

NUL_TEXT = "before\x00after " + "x" * 9000 + "\x00end"
"""A text over the 8 KiB blob threshold that holds NUL characters."""


def test_a_blob_holding_nul_comes_back_byte_for_byte(any_url):
    """PostgreSQL text columns refuse NUL; the blob is stored as bytes and reads back as on SQLite."""
    with contextledger.open_ledger(any_url) as ledger:
        session_id = ledger.start_session()
        ledger.add_assistant_message(session_id, tool_calls=[{"id": "c1", "name": "cat", "arguments": {}}])
        ledger.add_tool_result(session_id, "c1", NUL_TEXT)
        content = ledger.events(session_id)[-1].event.content
        assert isinstance(content, BlobText)
        back = ledger.text(content)
    assert hashlib.sha256(back.encode()).hexdigest() == hashlib.sha256(NUL_TEXT.encode()).hexdigest()


def test_an_inline_text_holding_nul_comes_back_unchanged(any_url):
    """Short texts live inside the event payload and keep their NUL characters too."""
    with contextledger.open_ledger(any_url) as ledger:
        session_id = ledger.start_session()
        ledger.add_user_message(session_id, "a\x00b")
        assert ledger.text(ledger.events(session_id)[-1].event.content) == "a\x00b"


@pytest.mark.parametrize("field", ["session_id", "idempotency_key"])
def test_a_name_holding_nul_is_refused_alike_everywhere(any_url, field):
    """A session id or idempotency key with NUL is InvalidMessageError on every backend; nothing is stored."""
    with contextledger.open_ledger(any_url) as ledger:
        before = [s.session_id for s in ledger.sessions()]
        options = {"session_id": "a\x00b"} if field == "session_id" else {"idempotency_key": "k\x00"}
        with pytest.raises(contextledger.InvalidMessageError, match="NUL"):
            ledger.start_session(**options)
        assert [s.session_id for s in ledger.sessions()] == before
        with pytest.raises(contextledger.SessionNotFoundError):
            ledger.events("a\x00b")


def test_a_relative_sqlite_url_reports_the_absolute_file(tmp_path, monkeypatch):
    """sqlite:///var/x.db is var/x.db under the working directory, and the ledger's URL says which file."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "var").mkdir()
    with contextledger.open_ledger("sqlite:///var/x.db") as ledger:
        assert ledger.store_url == f"sqlite:///{tmp_path / 'var' / 'x.db'}"
    assert (tmp_path / "var" / "x.db").exists()
    with contextledger.open_ledger(f"sqlite:///{tmp_path / 'var' / 'x.db'}") as ledger:
        assert ledger.store_url == f"sqlite:///{tmp_path / 'var' / 'x.db'}"


def test_a_relative_sqlite_url_into_a_missing_folder_names_the_resolved_path(tmp_path, monkeypatch):
    """The error says the path was read relative to the working directory and how to write an absolute one."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(contextledger.ConfigError) as caught:
        contextledger.open_ledger("sqlite:///var/x.db")
    message = str(caught.value)
    assert str(tmp_path / "var" / "x.db") in message
    assert "relative to the working directory" in message
    assert f"sqlite:///{tmp_path}{os.sep}var{os.sep}x.db" in message


def test_a_bad_sqlite_timeout_is_a_config_error(tmp_path):
    """The busy timeout option must be a positive number of seconds."""
    with pytest.raises(contextledger.ConfigError, match="timeout"):
        contextledger.open_ledger(f"sqlite:///{tmp_path / 'x.db'}?timeout=soon")


_WRONG_TYPES = {
    "pin reason None": lambda ledger, s: ledger.pin(s, 2, reason=None),
    "pin reason int": lambda ledger, s: ledger.pin(s, 2, reason=5),
    "a batch with one int reason": lambda ledger, s: ledger.pin_span(s, 2, 3, reason=5),
    "metadata with an int key": lambda ledger, s: ledger.start_session(metadata={1: 2}),
    "start time as text": lambda ledger, s: ledger.start_session(system_prompt="y", at="2024-01-01"),
    "a batch with one bad pin": lambda ledger, s: ledger.pin_span(s, 2, 3, reason=None),
}


@pytest.mark.parametrize("case", sorted(_WRONG_TYPES))
def test_an_event_with_a_field_of_the_wrong_type_is_refused_and_the_log_stays_readable(any_url, case):
    """A value of the wrong type is ``InvalidMessageError`` with nothing written, on every backend.

    Events are not validated when built, so ``pin(reason=None)`` or a fork at position 1.5 was stored and
    then failed every read of the session, and ``sessions()`` of the whole ledger (``EventDecodeError``):
    a log no reader could take. The store checks that each payload decodes as its own type before writing.
    """
    with contextledger.open_ledger(any_url) as ledger:
        session = ledger.start_session(system_prompt="x")
        ledger.add_user_message(session, "hi")
        ledger.add_user_message(session, "again")
        before = [info.session_id for info in ledger.sessions()]
        with pytest.raises(contextledger.InvalidMessageError, match="wrong type"):
            _WRONG_TYPES[case](ledger, session)
        assert ledger.version(session) == 3
        assert [r.position for r in ledger.events(session)] == [1, 2, 3]
        assert [info.session_id for info in ledger.sessions()] == before
        ledger.pin(session, 2, reason="still writable")
        assert ledger.version(session) == 4
