"""The PostgreSQL schema of a ledger: created, or migrated to ``SCHEMA_VERSION``, once per version."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg
from contextledger.adapters.store.session_starts import STARTED_TOPIC
from eventsourcing.postgres import PostgresDatastore
from psycopg.sql import SQL, Composable, Composed, Identifier, Literal

__all__ = ["SCHEMA_VERSION", "PostgresSchema", "postgres_statements"]

SCHEMA_VERSION = 8
"""2: blobs are stored as UTF-8 ``bytea`` (``text`` cannot hold NUL); 3: projection tables (rows, tracking,
active versions); 4: row keys ``COLLATE "C"``; 5: each event's transaction id and the claim function
(writers commit concurrently, ADR 0031); 6: the append function takes the stream's writer turn itself
(ADR 0035); 7: the claim no longer NOTIFYs, the writer does after its commit (ADR 0042); 8: session starts
alone are indexed by topic (ADR 0077, ``session_starts``). Schemas created before are migrated on open."""


def _field(row: Any, name: str) -> Any:
    """A column of a row, whether the connection's rows are dicts or tuples (one column read)."""
    return row[name] if isinstance(row, Mapping) else row[0]


def postgres_statements(schema: str, table: str, events: Composable) -> list[Composed]:
    """The statements of schema 8: the index of every topic dropped, the partial index of session starts."""
    return [
        SQL("DROP INDEX IF EXISTS {}").format(Identifier(schema, f"{table}_topic_idx")),
        SQL("CREATE INDEX IF NOT EXISTS {} ON {} (notification_id) WHERE topic = {}").format(
            Identifier(f"{table}_started_idx"), events, Literal(STARTED_TOPIC)
        ),
    ]


class PostgresSchema:
    """Creating and migrating the recorder's tables (part of ``PostgresRecorder``)."""

    datastore: PostgresDatastore
    meta_table: str
    blobs_table: str
    stored_event_type_name: str
    sql_create_statements: list[Composed]

    def _table(self, name: str) -> Composable:
        return SQL("{}.{}").format(Identifier(self.datastore.schema), Identifier(name))

    # -- schema --------------------------------------------------------------------------------

    def create_table(self) -> None:
        """Create (or migrate) the schema's tables, safely when several processes do it at once."""
        with self.datastore.get_connection() as conn:
            self.setup(conn)
        self.datastore.register_type_adapters()

    def setup(self, conn: psycopg.Connection[Any]) -> None:
        """Bring the schema to ``SCHEMA_VERSION`` on ``conn``, serialized by an advisory lock."""
        if self._version(conn) == SCHEMA_VERSION:
            return  # the common case: no DDL, no lock, nothing that could race
        schema = self.datastore.schema
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"contextledger:{schema}",))
            conn.execute("SET LOCAL statement_timeout = '600s'")  # a one-time migration of a large table
            if schema != "public":
                conn.execute(SQL("CREATE SCHEMA IF NOT EXISTS {}").format(Identifier(schema)))
            if self._version(conn) == SCHEMA_VERSION:
                return
            for statement in self.sql_create_statements:
                if "CREATE TYPE" in statement.as_string(conn) and self._type_exists(conn):
                    continue  # no IF NOT EXISTS for types; the lock makes check-then-create safe
                conn.execute(statement, prepare=False)
            self._migrate_blobs(conn)
            conn.execute(
                SQL(
                    "INSERT INTO {} VALUES ('schema', %s) "
                    "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
                ).format(self._table(self.meta_table)),
                (SCHEMA_VERSION,),
            )

    def _version(self, conn: psycopg.Connection[Any]) -> int | None:
        name = self._table(self.meta_table).as_string(conn)
        row = conn.execute("SELECT to_regclass(%s) IS NOT NULL AS present", (name,)).fetchone()
        if not row or not _field(row, "present"):
            return None
        found = conn.execute(
            SQL("SELECT value FROM {} WHERE key = 'schema'").format(self._table(self.meta_table))
        ).fetchone()
        return None if found is None else int(_field(found, "value"))

    def _type_exists(self, conn: psycopg.Connection[Any]) -> bool:
        row = conn.execute(
            "SELECT count(*) AS n FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace "
            "WHERE n.nspname = %s AND t.typname = %s",
            (self.datastore.schema, self.stored_event_type_name),
        ).fetchone()
        return bool(row and _field(row, "n"))

    def _migrate_blobs(self, conn: psycopg.Connection[Any]) -> None:
        """Schema 1 kept blobs in a ``text`` column (no NUL possible): convert it to UTF-8 bytes."""
        row = conn.execute(
            "SELECT count(*) AS n FROM information_schema.columns "
            "WHERE table_schema = %s AND table_name = %s AND column_name = 'text'",
            (self.datastore.schema, self.blobs_table),
        ).fetchone()
        if row and _field(row, "n"):
            table = self._table(self.blobs_table)
            conn.execute(SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS utf8 bytea").format(table))
            conn.execute(SQL("UPDATE {} SET utf8 = convert_to(text, 'UTF8')").format(table))
            conn.execute(SQL("ALTER TABLE {} ALTER COLUMN utf8 SET NOT NULL").format(table))
            conn.execute(SQL("ALTER TABLE {} DROP COLUMN text").format(table))
