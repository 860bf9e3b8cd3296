"""Open an event store from a URL: ``sqlite:///path.db``, ``postgresql://user@host:port/db`` or ``memory://``."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import psycopg
from contextledger.adapters.store.event_store import RecorderEventStore
from contextledger.adapters.store.recorders import (
    LedgerPOPORecorder,
    LedgerPostgresRecorder,
    LedgerSQLiteRecorder,
)
from contextledger.domain.errors import ConfigError, StoreUnavailableError
from eventsourcing.persistence import PersistenceError
from eventsourcing.postgres import PostgresDatastore
from eventsourcing.sqlite import SQLiteDatastore
from psycopg.sql import SQL, Identifier

__all__ = ["DEFAULT_URL", "ENV_VAR", "open_store", "resolve_url"]

ENV_VAR = "CONTEXTLEDGER_DB"
"""Environment variable naming the database URL when none is given."""

DEFAULT_URL = "sqlite:///contextledger.db"
"""The embedded default: a SQLite file in the working directory."""


def resolve_url(url: str | None) -> str:
    """Return ``url``, else ``$CONTEXTLEDGER_DB``, else the embedded SQLite default."""
    return url or os.environ.get(ENV_VAR) or DEFAULT_URL


def open_store(url: str | None = None) -> RecorderEventStore:
    """Open (creating tables if needed) the event store the URL names."""
    url = resolve_url(url)
    scheme = url.split(":", 1)[0].lower()
    if scheme == "memory":
        return RecorderEventStore(LedgerPOPORecorder(), url=url)
    if scheme == "sqlite":
        return _open_sqlite(url)
    if scheme in {"postgresql", "postgres"}:
        return _open_postgres(url)
    msg = f"unsupported database URL {url!r}: use sqlite:///path.db, postgresql://user@host:port/db or memory://"
    raise ConfigError(msg)


def _open_sqlite(url: str) -> RecorderEventStore:
    path = url.removeprefix("sqlite://")
    if not path.startswith("/") or path == "/":
        msg = f"SQLite URL {url!r} needs a file path: sqlite:///relative.db or sqlite:////absolute.db"
        raise ConfigError(msg)
    file = Path(path[1:])
    if file.parent and not file.parent.exists():
        msg = f"SQLite URL {url!r}: folder {file.parent} does not exist"
        raise ConfigError(msg)
    datastore = SQLiteDatastore(db_name=str(file), lock_timeout=5, originator_id_type="text")
    recorder = LedgerSQLiteRecorder(datastore, events_table_name="ledger_events")
    try:
        recorder.create_table()  # SQLite's default synchronous=FULL stays: appends are durable
    except PersistenceError as error:
        msg = f"cannot open SQLite ledger {file}: {error}"
        raise StoreUnavailableError(msg) from error
    return RecorderEventStore(recorder, url=url, on_close=datastore.close)


def _open_postgres(url: str) -> RecorderEventStore:
    parts = urlsplit(url)
    dbname = unquote(parts.path.lstrip("/"))
    if not dbname:
        msg = f"PostgreSQL URL {url!r} names no database"
        raise ConfigError(msg)
    query = parse_qs(parts.query)
    schema = query.get("schema", ["public"])[0]
    host = parts.hostname or "127.0.0.1"
    port = parts.port or 5432
    user = unquote(parts.username or "postgres")
    password = unquote(parts.password or "")
    try:
        if schema != "public":
            conninfo = psycopg.conninfo.make_conninfo(
                dbname=dbname, host=host, port=port, user=user, password=password or None, connect_timeout=5
            )
            with psycopg.connect(conninfo, autocommit=True) as conn:
                conn.execute(SQL("CREATE SCHEMA IF NOT EXISTS {}").format(Identifier(schema)))
        datastore = PostgresDatastore(
            dbname,
            host,
            port,
            user,
            password,
            schema=schema,
            originator_id_type="text",
            pool_size=2,
            max_overflow=4,
            lock_timeout=5,
            connect_timeout=5,
        )
        datastore.pool.open(wait=True, timeout=10)  # once, here: concurrent first opens race in psycopg_pool
        recorder = LedgerPostgresRecorder(datastore, events_table_name="contextledger_events")
        recorder.create_table()
    except (psycopg.Error, PersistenceError) as error:
        msg = f"cannot open PostgreSQL ledger at {host}:{port}/{dbname}: {error}"
        raise StoreUnavailableError(msg) from error
    return RecorderEventStore(recorder, url=url, on_close=datastore.close)
