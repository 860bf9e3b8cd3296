"""Projection tables on PostgreSQL: rows + tracking in one transaction, a registry, an advisory-lock lease."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import psycopg
from contextledger.adapters.store.projection_tables import NotificationRow, rows_of_recorder
from contextledger.domain.errors import ProjectionLockedError, StoreError
from contextledger.domain.ports import LeaseHolder, ProjectionCommit
from eventsourcing.postgres import PostgresDatastore
from psycopg.sql import SQL, Composable, Composed, Identifier

__all__ = ["PostgresProjectionTables", "projection_statements"]


def projection_statements(schema: str, prefix: str) -> list[Composed]:
    """The CREATE statements of the projection tables (schema version 4).

    Row keys compare byte-wise (``COLLATE "C"``, as SQLite does), so that key ranges (a session's
    calls, chunks, token blocks) are read through the primary key's index whatever the database's
    collation; schema 3 tables are altered to it.
    """

    def table(name: str) -> Composed:
        return SQL("{}.{}").format(Identifier(schema), Identifier(f"{prefix}_{name}"))

    return [
        SQL("CREATE TABLE IF NOT EXISTS {} (projection text PRIMARY KEY, position bigint NOT NULL)").format(
            table("projection_tracking")
        ),
        SQL(
            'CREATE TABLE IF NOT EXISTS {} (projection text, key text COLLATE "C", position bigint NOT NULL, '
            "state bytea NOT NULL, PRIMARY KEY (projection, key))"
        ).format(table("projection_rows")),
        SQL('ALTER TABLE {} ALTER COLUMN key TYPE text COLLATE "C"').format(table("projection_rows")),
        SQL("CREATE TABLE IF NOT EXISTS {} (name text PRIMARY KEY, version text NOT NULL)").format(
            table("projection_active")
        ),
    ]


class PostgresProjectionTables:
    """PostgreSQL projection tables (mixed into ``PostgresRecorder``)."""

    datastore: PostgresDatastore
    meta_table: str

    writes_aside = True
    """A commit runs on a pooled connection of its own; readers never wait for it."""

    def notification_rows(self, after: int, limit: int) -> list[NotificationRow]:
        """Return stored events after ``after`` through the recorder's notification read (gaps skipped)."""
        return rows_of_recorder(self, after, limit)

    def _ptable(self, name: str) -> Composable:
        prefix = self.meta_table.removesuffix("_meta")
        return SQL("{}.{}").format(Identifier(self.datastore.schema), Identifier(f"{prefix}_{name}"))

    def _leases(self) -> dict[str, tuple[str, psycopg.Connection[Any]]]:
        leases: dict[str, tuple[str, psycopg.Connection[Any]]] | None = getattr(self, "_held_leases", None)
        if leases is None:
            leases = {}
            self._held_leases = leases
        return leases

    def projection_checkpoints(self) -> dict[str, int]:
        """Return every checkpoint with its position."""
        with self.datastore.get_connection() as conn:
            rows = conn.execute(
                SQL("SELECT projection, position FROM {} ORDER BY projection").format(
                    self._ptable("projection_tracking")
                )
            ).fetchall()
        return {str(row["projection"]): int(row["position"]) for row in rows}

    def projection_tracking(self, projection: str) -> int:
        """Return the tracking position."""
        with self.datastore.get_connection() as conn:
            row = conn.execute(
                SQL("SELECT position FROM {} WHERE projection = %s").format(
                    self._ptable("projection_tracking")
                ),
                (projection,),
            ).fetchone()
        return 0 if row is None else int(row["position"])

    def projection_commit(self, commits: Sequence[ProjectionCommit], owner: str) -> None:
        """Write every commit's rows and tracking in one transaction (tracking rows locked first)."""
        del owner
        tracking_table = self._ptable("projection_tracking")
        with self.datastore.get_connection() as conn, conn.transaction(), conn.cursor() as curs:
            # Derived rows: the commit does not wait for the WAL flush (a crash of the server may undo the
            # last batches, rows and checkpoint together, which the runner redoes; nothing is half-written).
            curs.execute("SET LOCAL synchronous_commit = off")
            for commit in commits:
                if commit.tracking_of:
                    self._check_tracking(curs, commit)
                rows = commit.rows
                if rows:
                    curs.execute(
                        SQL(
                            "INSERT INTO {} SELECT %s, * FROM unnest(%s::text[], %s::bigint[], %b::bytea[]) "
                            "ON CONFLICT (projection, key) DO UPDATE SET position = EXCLUDED.position, "
                            "state = EXCLUDED.state"
                        ).format(self._ptable("projection_rows")),
                        (
                            commit.rows_of,
                            list(rows),
                            [v[0] for v in rows.values()],
                            [v[1] for v in rows.values()],
                        ),
                    )
                if commit.tracking_of:
                    curs.execute(
                        SQL("UPDATE {} SET position = %s WHERE projection = %s").format(tracking_table),
                        (commit.tracking, commit.tracking_of),
                    )

    def _check_tracking(self, curs: psycopg.Cursor[Any], commit: ProjectionCommit) -> None:
        """Lock the checkpoint row (created at 0 if absent); refuse a commit that would move it back."""
        tracking_table = self._ptable("projection_tracking")
        curs.execute(
            SQL("INSERT INTO {} VALUES (%s, 0) ON CONFLICT DO NOTHING").format(tracking_table),
            (commit.tracking_of,),
        )
        curs.execute(
            SQL("SELECT position FROM {} WHERE projection = %s FOR UPDATE").format(tracking_table),
            (commit.tracking_of,),
        )
        found = curs.fetchone()
        current = 0 if found is None else int(found["position"])
        if commit.tracking < current:
            msg = (
                f"projection {commit.tracking_of!r} is at {current}; a commit at "
                f"{commit.tracking} would move it back"
            )
            raise StoreError(msg)

    def projection_range(
        self, projection: str, after_key: str, upto_key: str
    ) -> dict[str, tuple[int, bytes]]:
        """Return the rows with ``after_key < key <= upto_key`` (byte order: keys are ``COLLATE "C"``)."""
        with self.datastore.get_connection() as conn:
            rows = conn.execute(
                SQL(
                    "SELECT key, position, state FROM {} WHERE projection = %s AND key > %s AND key <= %s"
                ).format(self._ptable("projection_rows")),
                (projection, after_key, upto_key),
            ).fetchall()
        return {str(row["key"]): (int(row["position"]), bytes(row["state"])) for row in rows}

    def projection_row(self, projection: str, key: str) -> tuple[int, bytes] | None:
        """Return one row."""
        with self.datastore.get_connection() as conn:
            row = conn.execute(
                SQL("SELECT position, state FROM {} WHERE projection = %s AND key = %s").format(
                    self._ptable("projection_rows")
                ),
                (projection, key),
            ).fetchone()
        return None if row is None else (int(row["position"]), bytes(row["state"]))

    def projection_rows(self, projection: str, keys: Sequence[str]) -> dict[str, tuple[int, bytes]]:
        """Return the rows of ``keys`` that exist, in one query."""
        with self.datastore.get_connection() as conn:
            rows = conn.execute(
                SQL("SELECT key, position, state FROM {} WHERE projection = %s AND key = ANY(%s)").format(
                    self._ptable("projection_rows")
                ),
                (projection, list(keys)),
            ).fetchall()
        return {str(row["key"]): (int(row["position"]), bytes(row["state"])) for row in rows}

    def projection_keys(self, projection: str) -> list[str]:
        """Return the row keys, sorted."""
        with self.datastore.get_connection() as conn:
            rows = conn.execute(
                SQL('SELECT key FROM {} WHERE projection = %s ORDER BY key COLLATE "C"').format(
                    self._ptable("projection_rows")
                ),
                (projection,),
            ).fetchall()
        return [str(row["key"]) for row in rows]

    def projection_drop(self, projection: str) -> None:
        """Delete rows and tracking."""
        with self.datastore.get_connection() as conn, conn.transaction():
            conn.execute(
                SQL("DELETE FROM {} WHERE projection = %s").format(self._ptable("projection_rows")),
                (projection,),
            )
            conn.execute(  # its own checkpoint and its shards' (``<name>@i/n``)
                SQL(
                    "DELETE FROM {} WHERE projection = %s "
                    "OR left(projection, char_length(%s) + 1) = %s || '@'"
                ).format(self._ptable("projection_tracking")),
                (projection, projection, projection),
            )

    def projection_activate(self, name: str, version: str) -> None:
        """Set the active version."""
        with self.datastore.get_connection() as conn:
            conn.execute(
                SQL(
                    "INSERT INTO {} VALUES (%s, %s) "
                    "ON CONFLICT (name) DO UPDATE SET version = EXCLUDED.version"
                ).format(self._ptable("projection_active")),
                (name, version),
            )

    def projection_active(self, name: str) -> str | None:
        """Return the active version."""
        with self.datastore.get_connection() as conn:
            row = conn.execute(
                SQL("SELECT version FROM {} WHERE name = %s").format(self._ptable("projection_active")),
                (name,),
            ).fetchone()
        return None if row is None else str(row["version"])

    def projection_acquire(self, projection: str, owner: str) -> None:
        """Take a session advisory lock on a connection kept out of the pool until release."""
        leases = self._leases()
        if projection in leases:
            if leases[projection][0] == owner:
                return
            raise ProjectionLockedError(projection, leases[projection][0])
        conn = self.datastore.pool.getconn()
        key = f"contextledger-projection:{self.datastore.schema}:{projection}"
        try:
            row = conn.execute("SELECT pg_try_advisory_lock(hashtext(%s)) AS ok", (key,)).fetchone()
        except BaseException:
            self.datastore.pool.putconn(conn)
            raise
        if not row or not row["ok"]:
            self.datastore.pool.putconn(conn)
            raise ProjectionLockedError(projection, "another PostgreSQL session")
        leases[projection] = (owner, conn)

    def projection_release(self, projection: str, owner: str) -> None:
        """Unlock and return the lease's connection to the pool."""
        leases = self._leases()
        held = leases.get(projection)
        if held is None or held[0] != owner:
            return
        del leases[projection]
        conn = held[1]
        try:
            conn.execute(
                "SELECT pg_advisory_unlock(hashtext(%s))",
                (f"contextledger-projection:{self.datastore.schema}:{projection}",),
            )
        finally:
            self.datastore.pool.putconn(conn)

    def projection_leases(self, names: Collection[str] | None = None) -> list[LeaseHolder]:
        """The advisory-lock leases held on the checkpointed views (or ``names``): each lives with a session.

        One query per view, so a caller that wants a few names passes them (``wait_for_leases``).
        """
        names = sorted({*self.projection_checkpoints(), *self._leases()} if names is None else set(names))
        found: list[LeaseHolder] = []
        with self.datastore.get_connection() as conn:
            for name in names:
                key = f"contextledger-projection:{self.datastore.schema}:{name}"
                row = conn.execute(
                    "SELECT l.pid, a.application_name FROM pg_locks l "
                    "LEFT JOIN pg_stat_activity a ON a.pid = l.pid "
                    "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
                    "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                    "AND ((l.classid::bigint << 32) | l.objid::bigint) = hashtext(%s)::bigint",
                    (key,),
                ).fetchone()
                if row is not None:
                    mine = self._leases().get(name)
                    holder = (
                        mine[0]
                        if mine
                        else f"PostgreSQL backend {row['pid']} {row['application_name'] or ''}"
                    )
                    found.append(
                        LeaseHolder(projection=name, holder=holder.strip(), expires=None, alive=True)
                    )
        return found

    def stored_schema_version(self) -> int | None:
        """The ``schema`` entry of the meta table (``SCHEMA_VERSION`` once migrated)."""
        with self.datastore.get_connection() as conn:
            row = conn.execute(
                SQL("SELECT value FROM {} WHERE key = 'schema'").format(
                    SQL("{}.{}").format(Identifier(self.datastore.schema), Identifier(self.meta_table))
                )
            ).fetchone()
        return None if row is None else int(row["value"])
