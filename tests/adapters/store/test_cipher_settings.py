"""eventsourcing's cipher settings are never silently ignored: no store opens in plaintext under them."""

from __future__ import annotations

import contextledger
import pytest
from contextledger.adapters.store.factory import refuse_ignored_cipher
from contextledger.domain.errors import ConfigError


@pytest.mark.parametrize("name", ["CIPHER_KEY", "CIPHER_TOPIC", "LEDGER_CIPHER_KEY"])
def test_cipher_settings_are_refused_with_a_typed_error(name, monkeypatch, tmp_path):
    """With CIPHER_KEY or CIPHER_TOPIC set, opening a ledger is a ConfigError naming it; nothing created."""
    monkeypatch.setenv(name, "c2VjcmV0")
    path = tmp_path / "l.db"
    with pytest.raises(ConfigError, match=name):
        contextledger.open_ledger(f"sqlite:///{path}")
    assert not path.exists()


def test_plaintext_may_be_accepted_explicitly(monkeypatch):
    """CONTEXTLEDGER_ALLOW_PLAINTEXT=1 opens the store (plaintext accepted); empty values count as unset."""
    refuse_ignored_cipher({"CIPHER_KEY": "", "PATH": "/bin"})
    refuse_ignored_cipher({"CIPHER_KEY": "k", "CONTEXTLEDGER_ALLOW_PLAINTEXT": "1"})
    monkeypatch.setenv("CIPHER_KEY", "k")
    monkeypatch.setenv("CONTEXTLEDGER_ALLOW_PLAINTEXT", "1")
    with contextledger.open_ledger("memory://") as ledger:
        assert ledger.sessions() == []
