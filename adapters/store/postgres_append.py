"""The common append (one event, no blob, no idempotency key) as a statement prepared once per connection.

psycopg's cursor renders, dumps, looks up its prepared-statement cache and builds a row maker at every
execute: ~18 µs of Python per statement, a tenth of an append's client CPU (ADR 0047). This sends the
four values straight through libpq (``send_query_prepared``) and waits with psycopg's own generator, so
the wait is the same (non-blocking, interruptible, the GIL released); errors are psycopg's, made from the
server's result as psycopg makes them.
"""

from __future__ import annotations

import hashlib
from typing import Any
from weakref import WeakKeyDictionary

import psycopg
from psycopg import errors, generators, pq
from psycopg.sql import SQL, Identifier

__all__ = ["OneEventAppend"]

_FORMATS = [pq.Format.TEXT, pq.Format.TEXT, pq.Format.TEXT, pq.Format.BINARY]
_NO_SUCH_STATEMENT = b"26000"
"""``invalid_sql_statement_name``: the prepared statement does not exist (any more) on the connection."""


class OneEventAppend:
    """``<table>_append`` of one event, prepared on each connection the first time it runs there."""

    def __init__(self, schema: str, table: str) -> None:
        """The statement for the append function of ``schema.table``."""
        function = SQL("{}.{}").format(Identifier(schema), Identifier(f"{table}_append")).as_string()
        self.sql = (
            f"SELECT {function}(ARRAY[$1::text], ARRAY[$2::bigint], ARRAY[$3::text], ARRAY[$4::bytea], "
            "'{}', '{}', '{}', '{}', '{}', '{}') AS ids"
        ).encode()
        self.name = b"contextledger_append_" + hashlib.sha256(self.sql).hexdigest()[:16].encode()
        self._encodings: WeakKeyDictionary[psycopg.Connection[Any], str] = WeakKeyDictionary()
        """Connections the statement is prepared on, each with its client encoding."""

    def run(
        self, conn: psycopg.Connection[Any], stream_id: str, version: int, topic: str, state: bytes
    ) -> list[int]:
        """Append on ``conn`` (autocommit: the statement is its own transaction); the notification ids.

        Raises psycopg's error for the server's (a gap: ``UniqueViolation``, an ``IntegrityError``).
        """
        encoding = self._encodings.get(conn)
        if encoding is None:
            encoding = self._prepare(conn)
        values = [stream_id.encode(encoding), b"%d" % version, topic.encode(encoding), state]
        result = self._send(conn, values)
        if result.error_field(pq.DiagnosticField.SQLSTATE) == _NO_SUCH_STATEMENT:
            # psycopg sends DEALLOCATE ALL after a ROLLBACK, DROP or ALTER on the connection (its own cache
            # is invalid then): the statement is gone. The error comes at Bind, before anything ran: resend.
            encoding = self._prepare(conn)
            result = self._send(conn, values)
        if result.status != pq.ExecStatus.TUPLES_OK:
            raise errors.error_from_result(result, encoding=encoding)
        ids = result.get_value(0, 0)
        return [int(i) for i in bytes(ids)[1:-1].split(b",")] if ids and len(ids) > 2 else []  # noqa: PLR2004

    def _send(self, conn: psycopg.Connection[Any], values: list[bytes]) -> pq.abc.PGresult:
        conn.pgconn.send_query_prepared(self.name, values, _FORMATS)
        results: list[pq.abc.PGresult] = conn.wait(generators.execute(conn.pgconn))
        return results[-1]

    def _prepare(self, conn: psycopg.Connection[Any]) -> str:
        pgconn = conn.pgconn
        pgconn.send_prepare(self.name, self.sql)
        result = conn.wait(generators.execute(pgconn))[-1]
        encoding = conn.info.encoding
        if result.status != pq.ExecStatus.COMMAND_OK:
            raise errors.error_from_result(result, encoding=encoding)
        self._encodings[conn] = encoding
        return encoding
