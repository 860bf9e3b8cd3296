"""Open an event store from a URL: ``sqlite:///path.db``, ``postgresql://user@host:port/db`` or ``memory://``."""

from __future__ import annotations

import os

from contextledger.adapters.store.event_store import RecorderEventStore
from contextledger.adapters.store.memory import MemoryRecorder
from contextledger.adapters.store.postgres import open_postgres
from contextledger.adapters.store.sqlite import open_sqlite
from contextledger.domain.errors import ConfigError

__all__ = ["DEFAULT_URL", "ENV_VAR", "PLAINTEXT_VAR", "open_store", "refuse_ignored_cipher", "resolve_url"]

ENV_VAR = "CONTEXTLEDGER_DB"
"""Environment variable naming the database URL when none is given."""

DEFAULT_URL = "sqlite:///contextledger.db"
"""The embedded default: a SQLite file in the working directory."""


PLAINTEXT_VAR = "CONTEXTLEDGER_ALLOW_PLAINTEXT"
"""Set to 1 to open a store although eventsourcing cipher settings are in the environment."""

_CIPHER_SETTINGS = ("CIPHER_TOPIC", "CIPHER_KEY")


def refuse_ignored_cipher(environ: dict[str, str] | None = None) -> None:
    """Refuse to open a store while eventsourcing's cipher settings are set: our store does not apply them.

    A user who knows eventsourcing may set ``CIPHER_TOPIC``/``CIPHER_KEY`` (or an app-prefixed form) and
    believe the texts encrypted; they would be stored in plaintext. ``CONTEXTLEDGER_ALLOW_PLAINTEXT=1``
    opens the store anyway.
    """
    env = dict(os.environ if environ is None else environ)
    if env.get(PLAINTEXT_VAR) == "1":
        return
    found = sorted(k for k in env if env[k] and any(k == s or k.endswith("_" + s) for s in _CIPHER_SETTINGS))
    if found:
        msg = (
            f"{', '.join(found)} set, but contextledger does not encrypt at rest through eventsourcing's "
            f"cipher: texts would be stored in plaintext. Unset them, or set {PLAINTEXT_VAR}=1 to accept that"
        )
        raise ConfigError(msg)


def resolve_url(url: str | None) -> str:
    """Return ``url``, else ``$CONTEXTLEDGER_DB``, else the embedded SQLite default."""
    return url or os.environ.get(ENV_VAR) or DEFAULT_URL


def open_store(url: str | None = None) -> RecorderEventStore:
    """Open (creating tables if needed) the event store the URL names.

    ``sqlite:///x.db`` is relative to the working directory and ``sqlite:////abs/x.db`` absolute; the
    opened store reports the absolute form in ``url``. Options: ``sqlite:///x.db?timeout=5`` (seconds a
    writer queues for the lock); ``postgresql://...?schema=s&connect_timeout=5&pool_timeout=10&
    statement_timeout=60&lock_timeout=5&idle_in_transaction_timeout=60`` (seconds).
    """
    url = resolve_url(url)
    refuse_ignored_cipher()
    scheme = url.split(":", 1)[0].lower()
    if scheme == "memory":
        return RecorderEventStore(MemoryRecorder(), url=url)
    if scheme == "sqlite":
        return open_sqlite(url)
    if scheme in {"postgresql", "postgres"}:
        return open_postgres(url)
    msg = f"unsupported database URL {url!r}: use sqlite:///path.db, postgresql://user@host:port/db or memory://"
    raise ConfigError(msg)
