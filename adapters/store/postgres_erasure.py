"""PostgreSQL erasure of a forgotten session's rows outside the log (mixed into ``PostgresRecorder``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from contextledger.application.kernel.logs import get_logger
from psycopg.sql import SQL, Composable, Identifier

__all__ = ["PostgresErasure"]

log = get_logger(__name__)


class PostgresErasure:
    """PostgreSQL erasure (mixed into ``PostgresRecorder``)."""

    datastore: Any
    blobs_table: str
    snapshots_table: str
    meta_table: str

    def _erasure_table(self, name: str) -> Composable:
        return SQL("{}.{}").format(Identifier(self.datastore.schema), Identifier(name))

    def erase_session(self, session_id: str, blob_keys: Sequence[str]) -> None:
        """Delete in one transaction, then vacuum the three tables (freed tuples reclaimed)."""
        rows_table = self.meta_table.removesuffix("_meta") + "_projection_rows"
        tables = [self.blobs_table, self.snapshots_table, rows_table]
        with self.datastore.get_connection() as conn:
            with conn.transaction():
                conn.execute(
                    SQL("DELETE FROM {} WHERE sha256 = ANY(%s)").format(self._erasure_table(tables[0])),
                    (list(blob_keys),),
                )
                conn.execute(
                    SQL("DELETE FROM {} WHERE strpos('/' || name || '/', '/' || %s || '/') > 0").format(
                        self._erasure_table(tables[1])
                    ),
                    (session_id,),
                )
                conn.execute(
                    SQL("DELETE FROM {} WHERE key = %s OR left(key, length(%s) + 1) = %s || '/'").format(
                        self._erasure_table(tables[2])
                    ),
                    (session_id, session_id, session_id),
                )
            autocommit = conn.autocommit
            conn.autocommit = True
            try:
                for table in tables:
                    conn.execute(SQL("VACUUM {}").format(self._erasure_table(table)))
            except psycopg.Error as error:  # e.g. not the tables' owner: the rows are deleted all the same
                log.warning("vacuum_after_forget_failed", session_id=session_id, error=str(error))
            finally:
                conn.autocommit = autocommit
