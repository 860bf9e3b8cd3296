"""eventsourcing's cipher settings are applied, never ignored: a key encrypts, a bad setting is refused."""

from __future__ import annotations

import base64
import os

import contextledger
import pytest
from contextledger.adapters.store.cipher import master_key
from contextledger.domain.errors import ConfigError

KEY = base64.b64encode(b"k" * 32).decode()


def test_no_key_means_no_encryption():
    """Without CIPHER_KEY or a key file there is no master key (empty values count as unset)."""
    assert master_key({"CIPHER_KEY": "", "PATH": "/bin"}) is None


def test_the_key_comes_from_the_environment_or_a_key_file(tmp_path):
    """CIPHER_KEY, CONTEXTLEDGER_KEY_FILE and an explicit key file give one key; both agreeing is fine."""
    file = tmp_path / "ledger.key"
    file.write_text(KEY + "\n")
    assert master_key({"CIPHER_KEY": KEY}) == KEY
    assert master_key({"CONTEXTLEDGER_KEY_FILE": str(file)}) == KEY
    assert master_key({}, key_file=str(file)) == KEY
    assert master_key({"CIPHER_KEY": KEY}, key_file=str(file)) == KEY


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        ({"CIPHER_KEY": "not base64!"}, "CIPHER_KEY is not a cipher key"),
        ({"CIPHER_KEY": base64.b64encode(b"short").decode()}, "16, 24 or 32 bytes"),
        ({"LEDGER_CIPHER_KEY": KEY}, "LEDGER_CIPHER_KEY set"),
        ({"APP_CIPHER_TOPIC": "eventsourcing.cipher:AESCipher"}, "APP_CIPHER_TOPIC set"),
        ({"CIPHER_TOPIC": "eventsourcing.cipher:AESCipher"}, "no key is"),
        ({"CIPHER_KEY": KEY, "CIPHER_TOPIC": "os:path"}, "not an eventsourcing Cipher"),
        ({"CIPHER_KEY": KEY, "CIPHER_TOPIC": "no_such_module:Cipher"}, "does not name a cipher class"),
        ({"CONTEXTLEDGER_KEY_FILE": "/nonexistent/ledger.key"}, "cannot read key file"),
    ],
)
def test_a_bad_cipher_setting_is_refused_before_anything_is_created(env, problem, monkeypatch, tmp_path):
    """A malformed key, a prefixed (ignored) setting or an unknown cipher: ConfigError naming it, no file."""
    for name in ("CIPHER_KEY", "CIPHER_TOPIC", "CONTEXTLEDGER_KEY_FILE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    path = tmp_path / "l.db"
    with pytest.raises(ConfigError, match=problem):
        contextledger.open_ledger(f"sqlite:///{path}")
    assert not path.exists()


def test_two_different_keys_are_refused(tmp_path):
    """CIPHER_KEY and a key file holding another key: ConfigError (which one was meant is unknown)."""
    file = tmp_path / "other.key"
    file.write_text(base64.b64encode(os.urandom(32)).decode())
    with pytest.raises(ConfigError, match="different keys"):
        master_key({"CIPHER_KEY": KEY}, key_file=str(file))


def test_cipher_topic_names_the_cipher_used(monkeypatch, tmp_path):
    """CIPHER_TOPIC naming eventsourcing's AES-GCM cipher explicitly opens and encrypts like the default."""
    monkeypatch.setenv("CIPHER_KEY", KEY)
    monkeypatch.setenv("CIPHER_TOPIC", "eventsourcing.cipher:AESCipher")
    path = tmp_path / "l.db"
    with contextledger.open_ledger(f"sqlite:///{path}") as ledger:
        session = ledger.start_session(system_prompt="a system prompt that is encrypted")
        assert ledger.events(session)[0].event.system_prompt == "a system prompt that is encrypted"
    assert b"a system prompt that is encrypted" not in path.read_bytes() + _wal(path)


def _wal(path):
    wal = path.with_name(path.name + "-wal")
    return wal.read_bytes() if wal.exists() else b""
