"""Open an event store from a URL: ``sqlite:///path.db``, ``postgresql://user@host:port/db`` or ``memory://``."""

from __future__ import annotations

import os

from contextledger.adapters.store.cipher import (
    CHECK_BLOB,
    CIPHER_KEY,
    CIPHER_TOPIC,
    KEY_FILE_VAR,
    Keyring,
    master_key,
)
from contextledger.adapters.store.event_store import RecorderEventStore
from contextledger.adapters.store.guards import translated
from contextledger.adapters.store.memory import MemoryRecorder
from contextledger.adapters.store.sealing import Sealer
from contextledger.adapters.store.sqlite import open_sqlite
from contextledger.domain.errors import ConfigError, LedgerKeyError

__all__ = ["DEFAULT_URL", "ENV_VAR", "encryption", "keyring_from_settings", "open_store", "resolve_url"]

ENV_VAR = "CONTEXTLEDGER_DB"
"""Environment variable naming the database URL when none is given."""

DEFAULT_URL = "sqlite:///contextledger.db"
"""The embedded default: a SQLite file in the working directory."""


def keyring_from_settings(key_file: str | None = None) -> Keyring | None:
    """The keyring of the configured master key (``key_file``, ``CONTEXTLEDGER_KEY_FILE``, ``CIPHER_KEY``).

    Raises:
        ConfigError: a malformed key or cipher setting.
    """
    key = master_key(key_file=key_file)
    return None if key is None else Keyring(key, os.environ.get(CIPHER_TOPIC))


def encryption(store: RecorderEventStore, keyring: Keyring | None) -> RecorderEventStore:
    """Make ``store`` encrypt at rest with ``keyring``; without one, refuse an encrypted ledger.

    Raises:
        LedgerKeyError: an encrypted ledger opened without its key or with another one, or a key given
            for a ledger that holds plaintext events.
    """
    if keyring is None:
        _refuse_locked(store)
    else:
        store.encrypt_with(Sealer(keyring, store.extras.read_blob))
    return store


def _refuse_locked(store: RecorderEventStore) -> None:
    """Opening an encrypted ledger without a key is refused before anything is read or written."""
    with translated("check the ledger's key"):
        locked = store.extras.read_blob(CHECK_BLOB) is not None
    if locked:
        msg = (
            f"this ledger is encrypted: give its key ({CIPHER_KEY}, {KEY_FILE_VAR} or --key-file); "
            "nothing was read or written"
        )
        raise LedgerKeyError(msg)


def resolve_url(url: str | None) -> str:
    """Return ``url``, else ``$CONTEXTLEDGER_DB``, else the embedded SQLite default."""
    return url or os.environ.get(ENV_VAR) or DEFAULT_URL


def open_store(url: str | None = None, *, key_file: str | None = None) -> RecorderEventStore:
    """Open (creating tables if needed) the event store the URL names.

    ``sqlite:///x.db`` is relative to the working directory and ``sqlite:////abs/x.db`` absolute; the
    opened store reports the absolute form in ``url``. Options: ``sqlite:///x.db?timeout=5`` (seconds a
    writer queues for the lock); ``postgresql://...?schema=s&connect_timeout=5&pool_timeout=10&
    statement_timeout=60&lock_timeout=5&idle_in_transaction_timeout=60`` (seconds). With a key
    (``key_file``, ``CONTEXTLEDGER_KEY_FILE`` or ``CIPHER_KEY``) the ledger is encrypted at rest.
    """
    url = resolve_url(url)
    keyring = keyring_from_settings(key_file)  # a bad key setting is refused before anything is opened
    scheme = url.split(":", 1)[0].lower()
    if scheme == "memory":
        store = RecorderEventStore(MemoryRecorder(), url=url)
    elif scheme == "sqlite":
        store = open_sqlite(url)
    elif scheme in {"postgresql", "postgres"}:
        from contextledger.adapters.store.postgres import open_postgres  # noqa: PLC0415 - psycopg only when used

        store = open_postgres(url)
    else:
        msg = f"unsupported database URL {url!r}: use sqlite:///path.db, postgresql://user@host:port/db or memory://"
        raise ConfigError(msg)
    try:
        return encryption(store, keyring)
    except BaseException:
        store.close()
        raise
