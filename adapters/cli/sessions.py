"""``contextledger sessions`` and ``contextledger show``: list sessions, print one's history."""

from __future__ import annotations

from typing import Annotated

import typer
from contextledger.adapters.cli.common import (
    DbOption,
    JsonOption,
    console,
    emit_json,
    ledger_for,
    run_guarded,
)
from contextledger.adapters.cli.history import history_rows, print_history
from rich.table import Table

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``sessions`` and ``show`` to ``app``."""

    @app.command("sessions")
    def sessions_command(db: DbOption = None, json_output: JsonOption = False) -> None:
        """List the stored sessions with their event counts."""

        def body() -> None:
            with ledger_for(db) as ledger:
                infos = ledger.sessions()
                if json_output:
                    emit_json(infos)
                    return
                table = Table("session", "events", "model", "source", "started")
                for info in infos:
                    started = info.started_at.isoformat(timespec="seconds") if info.started_at else ""
                    table.add_row(
                        info.session_id, str(info.events), info.model or "", info.source or "", started
                    )
                console.print(table)
                console.print(f"{len(infos)} sessions")

        run_guarded(body)

    @app.command("show")
    def show_command(
        session_id: Annotated[str, typer.Argument(help="The session to print.")],
        db: DbOption = None,
        json_output: JsonOption = False,
    ) -> None:
        """Print a session's history with the position of every event."""

        def body() -> None:
            with ledger_for(db) as ledger:
                rows = history_rows(ledger, session_id)
                if json_output:
                    emit_json({"session_id": session_id, "events": rows})
                    return
                print_history(console, rows)

        run_guarded(body)
