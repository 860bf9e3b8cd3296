"""Erasing a forgotten session's rows outside the log, on each backend (mixed into the recorders).

``erase_session`` deletes, in one transaction: the blob rows named (the session's wrapped data key and
its texts no other session holds), every snapshot whose name holds the session id as a path segment
(``render/vN/<session>/...``, ``search/vN/<session>/<chunk>``), and every projection row keyed
``<session>`` or ``<session>/...``. These are derived rows or the key itself; the log is not touched.
Deleting a row of another session whose id shares the prefix only costs that session a refold.

SQLite deletes with ``secure_delete`` (freed bytes overwritten with zeros) and then truncates the
write-ahead log, so neither file keeps the deleted rows. PostgreSQL vacuums the tables it deleted from,
so the freed tuples are reclaimed (``postgres_erasure``, apart so that a SQLite ledger never loads psycopg);
copies that left the database before (backups, WAL archives) are out of its reach (see ADR 30).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from contextledger.application.kernel.logs import get_logger
from eventsourcing.persistence import DatabaseError, OperationalError

__all__ = ["MemoryErasure", "SQLiteErasure"]

log = get_logger(__name__)


def _named(name: str, session_id: str) -> bool:
    """Whether a snapshot name holds ``session_id`` as one of its ``/`` segments."""
    return f"/{session_id}/" in f"/{name}/"


def _keyed(key: str, session_id: str) -> bool:
    return key == session_id or key.startswith(session_id + "/")


class MemoryErasure:
    """In-memory erasure (mixed into ``MemoryRecorder``)."""

    database_lock: Any
    _blobs: dict[str, str]
    _snapshots: dict[str, tuple[int, bytes]]

    def erase_session(self, session_id: str, blob_keys: Sequence[str]) -> None:
        """Delete the blobs named and the session's snapshots and projection rows."""
        with self.database_lock:
            for key in blob_keys:
                self._blobs.pop(key, None)
            for name in [n for n in self._snapshots if _named(n, session_id)]:
                del self._snapshots[name]
            tables: dict[str, Any] = getattr(self, "_ptables", None) or {"rows": {}}
            for rows in tables["rows"].values():
                for key in [k for k in rows if _keyed(k, session_id)]:
                    del rows[key]


class SQLiteErasure:
    """SQLite erasure (mixed into ``SQLiteRecorder``)."""

    datastore: Any

    def erase_session(self, session_id: str, blob_keys: Sequence[str]) -> None:
        """Delete with ``secure_delete`` in one transaction, then truncate the write-ahead log."""
        try:
            self._erase_sqlite(session_id, blob_keys)
        except sqlite3.OperationalError as error:
            raise OperationalError(str(error)) from error
        except sqlite3.Error as error:
            raise DatabaseError(str(error)) from error

    def _erase_sqlite(self, session_id: str, blob_keys: Sequence[str]) -> None:
        with self.datastore.get_connection(commit=True) as conn:
            cursor = conn.cursor()
            cursor.execute("PRAGMA secure_delete=ON")
            try:
                cursor.execute("BEGIN IMMEDIATE")
                try:
                    cursor.executemany("DELETE FROM ledger_blobs WHERE sha256 = ?", [(k,) for k in blob_keys])
                    cursor.execute(
                        "DELETE FROM ledger_snapshots WHERE instr('/' || name || '/', '/' || ? || '/') > 0",
                        (session_id,),
                    )
                    cursor.execute(
                        "DELETE FROM ledger_projection_rows WHERE key = ? "
                        "OR substr(key, 1, length(?) + 1) = ? || '/'",
                        (session_id, session_id, session_id),
                    )
                    conn.commit()
                except BaseException:
                    conn.rollback()
                    raise
                cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                cursor.execute("PRAGMA secure_delete=OFF")
                cursor.sqlite_cursor.close()
