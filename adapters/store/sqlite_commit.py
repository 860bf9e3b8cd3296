"""A SQLite projection commit in three statements, whatever it holds (ADR 0073)."""

from __future__ import annotations

import functools
import json
import sqlite3
from typing import Any

__all__ = ["ROWS_PER_INSERT", "Behind", "rows_per_insert", "write_commit"]

ROWS_PER_INSERT = 2_000
"""The most projection rows one ``INSERT`` statement writes (fewer where SQLite binds fewer values).

``executemany`` steps once per row, and ``sqlite3`` releases the GIL around every step: a commit set aside
(ADR 0056) took the GIL back from the folding thread at every row it wrote. One statement of many rows
takes it back once per statement, so a batch's rows of every view go in one statement (ADR 0073).
"""


def rows_per_insert(cursor: Any) -> int:
    """Rows a statement may bind on ``cursor``'s connection (four values each), at most ROWS_PER_INSERT."""
    limit: int = cursor.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    return max(1, min(ROWS_PER_INSERT, limit // 4))


@functools.lru_cache(maxsize=64)
def _insert_rows(count: int) -> str:
    """The statement that writes ``count`` projection rows (the texts of the sizes seen last are kept)."""
    placeholders = ", ".join(["(?, ?, ?, ?)"] * count)  # only placeholders: every value is bound
    return f"INSERT OR REPLACE INTO ledger_projection_rows VALUES {placeholders}"  # noqa: S608


_TRACK = (
    "INSERT INTO ledger_projection_tracking SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') "
    "FROM json_each(?) WHERE json_extract(value, '$[1]') >= 0 ON CONFLICT (projection) DO UPDATE "
    "SET position = excluded.position WHERE excluded.position >= ledger_projection_tracking.position"
)
"""Every checkpoint of a commit moved in one statement, in order; one that would move back is left."""


class Behind(Exception):  # noqa: N818 - a signal inside ``projection_commit``, never raised out of it
    """A checkpoint of the commit would move back: the transaction is rolled back, then it is named."""


_RENEW = (
    "UPDATE ledger_projection_leases SET expires = ? WHERE owner = ? "
    "AND projection IN (SELECT value FROM json_each(?))"
)


def write_commit(
    c: Any,
    tracked: list[tuple[str, int]],
    rows: list[tuple[str, str, int, bytes]],
    owner: str,
    expires: float,
) -> None:
    """Run a commit's three statements in its open transaction (cursor ``c``).

    ``tracked``: the checkpoints moved, in order; ``rows``: every view's rows; ``owner``'s leases on the
    checkpoints are renewed to ``expires``. Raises ``Behind`` when a checkpoint would move back.
    """
    if tracked:
        c.execute(_TRACK, (json.dumps(tracked),))
        if c.sqlite_cursor.rowcount != len(tracked):
            raise Behind
    step = rows_per_insert(c.sqlite_cursor)
    for start in range(0, len(rows), step):
        chunk = rows[start : start + step]
        c.execute(_insert_rows(len(chunk)), [value for row in chunk for value in row])
    if tracked:
        names = json.dumps(sorted({name for name, _ in tracked}))
        c.execute(_RENEW, (expires, owner, names))
