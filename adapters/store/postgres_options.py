"""How a PostgreSQL URL becomes connection settings: the schema and a bound on every wait."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from contextledger.domain.errors import ConfigError

__all__ = ["PostgresOptions", "connection_settings"]


@dataclass(frozen=True)
class PostgresOptions:
    """Bounds on every wait, in seconds; each can be set in the URL (``?statement_timeout=120``).

    ``notify_interval``: at most one NOTIFY per this many seconds announces a writer's commits to live
    tails (ADR 0047); the first commit after a quiet interval is announced at once.
    """

    connect_timeout: float = 5.0
    pool_timeout: float = 10.0
    statement_timeout: float = 60.0
    lock_timeout: float = 5.0
    idle_in_transaction_timeout: float = 60.0
    notify_interval: float = 0.05

    @classmethod
    def parse(cls, url: str, query: dict[str, list[str]]) -> PostgresOptions:
        """Read the options the URL's query sets; anything else but ``schema`` is refused."""
        known = set(cls.__dataclass_fields__)
        values: dict[str, float] = {}
        for name, raw in query.items():
            if name == "schema":
                continue
            if name not in known:
                names = ", ".join(sorted(known))
                msg = f"PostgreSQL URL {url!r}: unknown option {name!r} (known: schema, {names})"
                raise ConfigError(msg)
            try:
                values[name] = float(raw[0])
            except ValueError:
                values[name] = -1.0
            if not values[name] > 0:
                msg = f"PostgreSQL URL {url!r}: {name} must be a positive number of seconds, got {raw[0]!r}"
                raise ConfigError(msg)
        return cls(**values)

    def server_settings(self) -> str:
        """The libpq ``options`` string that sets the server-side timeouts of every connection."""
        return (
            f"-c statement_timeout={int(self.statement_timeout * 1000)} "
            f"-c lock_timeout={int(self.lock_timeout * 1000)} "
            f"-c idle_in_transaction_session_timeout={int(self.idle_in_transaction_timeout * 1000)}"
        )


def connection_settings(url: str) -> tuple[dict[str, Any], str, PostgresOptions]:
    """Return the libpq keyword arguments, the schema and the wait bounds a PostgreSQL URL names."""
    parts = urlsplit(url)
    dbname = unquote(parts.path.lstrip("/"))
    if not dbname:
        msg = f"PostgreSQL URL {url!r} names no database"
        raise ConfigError(msg)
    query = parse_qs(parts.query)
    options = PostgresOptions.parse(url, query)
    kwargs: dict[str, Any] = {
        "dbname": dbname,
        "host": parts.hostname or "127.0.0.1",
        "port": parts.port or 5432,
        "user": unquote(parts.username or "postgres"),
        "password": unquote(parts.password or "") or None,
        "connect_timeout": max(2, round(options.connect_timeout)),  # libpq's floor is 2 s
        "options": options.server_settings(),
        "keepalives": 1,
        "keepalives_idle": 10,
        "keepalives_interval": 5,
        "keepalives_count": 3,
        "tcp_user_timeout": int(options.statement_timeout * 1000),
        "application_name": "contextledger",
    }
    return kwargs, query.get("schema", ["public"])[0], options
