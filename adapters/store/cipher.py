"""Encryption at rest through eventsourcing's cipher (AES-GCM), with one data key per session.

The master key comes from ``CIPHER_KEY`` (eventsourcing's own setting: base64 of 16, 24 or 32 bytes) or
from a key file (``--key-file`` / ``CONTEXTLEDGER_KEY_FILE``); ``CIPHER_TOPIC`` may name another
eventsourcing ``Cipher`` class (default ``eventsourcing.cipher:AESCipher``). From it:

- each session gets a random **data key** (envelope encryption): stored wrapped by the master key in the
  blob table under ``key:<index of the session>``, written in the same transaction as the session's
  first event; the session's events and side streams are encrypted under it. ``forget`` deletes it
  (crypto-shredding): the events stay in the append-only log, undecryptable by anyone;
- a **ledger key** (HMAC-derived from the master) encrypts what is not one session's stream: blobs,
  snapshots, projection rows, tombstones and the key check;
- an **index key** (HMAC-derived) turns the lookup columns that would otherwise hold a digest of a text
  (blob addresses, token-count keys) or a caller's key (idempotency keys) into keyed HMACs.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from contextledger.domain.errors import ConfigError, LedgerKeyError, SessionForgottenError
from eventsourcing.persistence import Cipher
from eventsourcing.utils import Environment, TopicError, resolve_topic

__all__ = [
    "CHECK_BLOB",
    "CIPHER_KEY",
    "CIPHER_TOPIC",
    "KEY_FILE_VAR",
    "Keyring",
    "master_key",
    "session_of_stream",
]

CIPHER_KEY = "CIPHER_KEY"
"""eventsourcing's setting: the base64 master key."""

CIPHER_TOPIC = "CIPHER_TOPIC"
"""eventsourcing's setting: the ``Cipher`` class (``module:Class``); AES-GCM when unset."""

KEY_FILE_VAR = "CONTEXTLEDGER_KEY_FILE"
"""A file holding the base64 master key (what ``--key-file`` sets)."""

CHECK_BLOB = "key-check"
"""The blob row whose decryption proves the key is the ledger's (written with the first append)."""

_CHECK_TEXT = b"contextledger encrypted ledger v1"
_DEFAULT_TOPIC = "eventsourcing.cipher:AESCipher"


def session_of_stream(stream_id: str) -> str:
    """The session a stream belongs to: ``<session>`` or ``<session>::<kind>`` (its side streams)."""
    return stream_id.partition("::")[0]


def _decode_key(raw: str, where: str) -> bytes:
    try:
        key = base64.b64decode(raw.strip().encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        key = b""
    if len(key) not in {16, 24, 32}:
        msg = (
            f"{where} is not a cipher key: base64 of 16, 24 or 32 bytes expected "
            '(make one with: python -c "import os,base64;print(base64.b64encode(os.urandom(32)).decode())")'
        )
        raise ConfigError(msg)
    return key


def master_key(environ: Mapping[str, str] | None = None, key_file: str | None = None) -> str | None:
    """The base64 master key from ``key_file``, ``CONTEXTLEDGER_KEY_FILE`` or ``CIPHER_KEY``, or None.

    Raises:
        ConfigError: an unreadable key file, a malformed key, two different keys, or eventsourcing's
            cipher setting under an application prefix (``X_CIPHER_KEY``), which would be ignored.
    """
    env = os.environ if environ is None else environ
    prefixed = sorted(k for k in env if env[k] and k.endswith(("_" + CIPHER_KEY, "_" + CIPHER_TOPIC)))
    if prefixed:
        msg = (
            f"{', '.join(prefixed)} set: contextledger reads {CIPHER_KEY} and {CIPHER_TOPIC} without a prefix"
        )
        raise ConfigError(msg)
    found: dict[str, str] = {}
    file = key_file or env.get(KEY_FILE_VAR)
    if file:
        try:
            found[f"key file {file}"] = Path(file).read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError) as error:
            msg = f"cannot read key file {file}: {error}"
            raise ConfigError(msg) from None
    if env.get(CIPHER_KEY):
        found[CIPHER_KEY] = env[CIPHER_KEY].strip()
    keys = {name: _decode_key(raw, name) for name, raw in found.items()}
    if len(set(keys.values())) > 1:
        msg = f"{' and '.join(keys)} hold different keys: give one"
        raise ConfigError(msg)
    if not found and env.get(CIPHER_TOPIC):
        msg = f"{CIPHER_TOPIC} is set but no key is: set {CIPHER_KEY} or {KEY_FILE_VAR} (or --key-file)"
        raise ConfigError(msg)
    return next(iter(found.values()), None)


def _cipher_factory(topic: str) -> Callable[[bytes], Cipher]:
    try:
        cipher_type = resolve_topic(topic)
    except (ImportError, AttributeError, ValueError, TopicError) as error:
        msg = f"{CIPHER_TOPIC}={topic!r} does not name a cipher class: {error}"
        raise ConfigError(msg) from None
    if not (isinstance(cipher_type, type) and issubclass(cipher_type, Cipher)):
        msg = f"{CIPHER_TOPIC}={topic!r} is not an eventsourcing Cipher"
        raise ConfigError(msg)

    def make(key: bytes) -> Cipher:
        env = Environment(env={CIPHER_KEY: base64.b64encode(key).decode("ascii")})
        return cipher_type(env)

    return make


class Keyring:
    """The master key, the keys derived from it and the sessions' data keys (cached once unwrapped)."""

    def __init__(self, key: str, topic: str | None = None) -> None:
        """Build the ciphers of a base64 master key (``topic``: the ``Cipher`` class, AES-GCM if None)."""
        raw = _decode_key(key, CIPHER_KEY)
        self._make = _cipher_factory(topic or _DEFAULT_TOPIC)
        self.master = self._make(raw)
        self.ledger = self._make(hmac.digest(raw, b"contextledger/ledger-key", "sha256"))
        self._index_key = hmac.digest(raw, b"contextledger/index-key", "sha256")
        self._sessions: dict[str, Cipher] = {}
        self._lock = threading.Lock()

    # -- indexes and the ledger key ----------------------------------------------------------

    def index(self, name: str) -> str:
        """A keyed HMAC of a lookup value (blob address, idempotency key): equal in, equal out."""
        return hmac.new(self._index_key, name.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()

    def seal_text(self, text: str) -> str:
        """Encrypt a blob's text under the ledger key (base64, so it fits the blob tables' text column)."""
        return base64.b64encode(self.ledger.encrypt(text.encode("utf-8", "surrogatepass"))).decode("ascii")

    def open_text(self, sealed: str) -> str:
        """Decrypt what ``seal_text`` returned."""
        return self.ledger.decrypt(base64.b64decode(sealed)).decode("utf-8", "surrogatepass")

    def check_value(self) -> str:
        """The key check stored with the first append."""
        return base64.b64encode(self.ledger.encrypt(_CHECK_TEXT)).decode("ascii")

    def verify(self, stored: str) -> None:
        """Raise ``LedgerKeyError`` unless ``stored`` (the key check) decrypts under this key."""
        try:
            ok = self.ledger.decrypt(base64.b64decode(stored)) == _CHECK_TEXT
        except (ValueError, binascii.Error):
            ok = False
        if not ok:
            msg = "this ledger is encrypted under another key: nothing was read or written"
            raise LedgerKeyError(msg)

    # -- session data keys --------------------------------------------------------------------

    @staticmethod
    def key_blob(session_id: str) -> str:
        """Where a session's wrapped data key is stored (its row in the blob table, before indexing)."""
        return f"key:{session_id}"

    def new_session_key(self, session_id: str) -> tuple[Cipher, str]:
        """Make a new session's data key: its cipher, and its wrapped form to store with the first event.

        It is cached (``remember``) only once that event is stored: a concurrent start that lost keeps
        no key that the ledger does not hold.
        """
        del session_id
        data_key = os.urandom(32)
        return self._make(data_key), base64.b64encode(self.master.encrypt(data_key)).decode("ascii")

    def remember(self, session_id: str, cipher: Cipher) -> None:
        """Cache a session's data key (its wrapped form is stored)."""
        with self._lock:
            self._sessions[session_id] = cipher

    def forget_cached(self, session_id: str) -> None:
        """Drop an unwrapped data key from memory (after the session is forgotten)."""
        with self._lock:
            self._sessions.pop(session_id, None)

    def session_cipher(self, session_id: str, load: Callable[[], str | None]) -> Cipher:
        """The session's cipher, unwrapping its stored data key (``load``) on first use.

        Raises:
            SessionForgottenError: the session has no data key (it was forgotten, or never started).
            LedgerKeyError: the stored key does not unwrap under the master key.
        """
        with self._lock:
            found = self._sessions.get(session_id)
        if found is not None:
            return found
        wrapped = load()
        if wrapped is None:
            raise SessionForgottenError(session_id)
        try:
            cipher = self._make(self.master.decrypt(base64.b64decode(wrapped)))
        except (ValueError, binascii.Error):
            msg = f"the data key of session {session_id!r} does not unwrap under this master key"
            raise LedgerKeyError(msg) from None
        with self._lock:
            self._sessions[session_id] = cipher
        return cipher
