"""``doctor`` (alias ``info``): the database, its schema, tokenizers, projection versions and lag, leases."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from contextledger.adapters.cli.common import (
    DbOption,
    JsonOption,
    cell,
    command,
    emit_json,
    ledger_for,
    out_console,
    run_guarded,
)
from contextledger.adapters.cli.ids import id_column

if TYPE_CHECKING:
    from contextledger.application.rebuild.health import Health

__all__ = ["register"]


def _print(report: Health) -> None:
    from rich.table import Table  # noqa: PLC0415 - rich loads only when a command prints

    console = out_console()
    schema = "none recorded (memory)" if report.schema_version is None else str(report.schema_version)
    console.print(cell(f"database: {report.store_url}"))
    console.print(cell(f"schema version: {schema}"))
    console.print(cell(f"log head: notification {report.head:,}"))
    console.print(cell(f"active context version: {report.active_context or '(none)'}"))
    tokenizers = Table("tokenizer", "offline", "why not", title="tokenizers")
    for t in report.tokenizers:
        tokenizers.add_row(cell(t.name), cell("yes" if t.available else "no"), cell(t.problem or ""))
    console.print(tokenizers)
    views = Table(
        id_column("checkpoint"), "position", "behind", "active", title="projection versions and views (lag)"
    )
    for v in report.views:
        views.add_row(
            cell(v.checkpoint),
            cell(f"{v.position:,}"),
            cell(f"{v.behind:,}"),
            cell("yes" if v.active else ""),
        )
    console.print(views)
    leases = Table("kind", id_column("of"), id_column("holder"), "expires", "alive", title="worker leases")
    for lease in report.projection_leases:
        expires = lease.expires.isoformat(timespec="seconds") if lease.expires else "while connected"
        leases.add_row(
            *map(cell, ("projection", lease.projection, lease.holder, expires, _alive(lease.alive)))
        )
    for s in report.summary_leases:
        expires = s.expires.isoformat(timespec="seconds") if s.expires else ""
        of = f"{s.session_id} {s.request_id}"
        leases.add_row(*map(cell, ("summary", of, s.holder, expires, _alive(s.alive))))
    console.print(leases if leases.row_count else cell("worker leases: none held"))


def _alive(alive: bool) -> str:
    return "alive" if alive else "dead (its lease is taken over)"


def register(app: typer.Typer) -> None:
    """Add ``doctor`` and its alias ``info`` to ``app``."""

    def doctor(db: DbOption = None, json_output: JsonOption = False) -> None:
        """Say what the store holds and who works on it; ``info`` is the same command.

        The database (password masked), its schema version, the tokenizers available offline, the
        projection versions and views with their lag behind the log's head, and the worker leases
        (projection and summary: holder, expiry, alive or dead).

        --json prints {"store_url", "schema_version", "tokenizers": [{"name", "available", "problem"}],
        "head", "active_context", "views": [{"checkpoint", "position", "behind", "active"}],
        "projection_leases": [{"projection", "holder", "expires", "alive"}], "summary_leases": [...]}.
        """

        def body() -> None:
            from contextledger.adapters.system import worker_alive  # noqa: PLC0415 - loaded on use
            from contextledger.adapters.tokenizers import available_tokenizers  # noqa: PLC0415
            from contextledger.application.rebuild.health import health  # noqa: PLC0415

            with ledger_for(db) as ledger:
                report = health(ledger, tokenizers=available_tokenizers(), holder_alive=worker_alive)
            if json_output:
                emit_json(report)
            else:
                _print(report)

        run_guarded(body, json_output=json_output)

    command(app, "doctor", example="contextledger doctor --db sqlite:///agent.db --json")(doctor)
    command(app, "info", example="contextledger info --db sqlite:///agent.db")(doctor)
