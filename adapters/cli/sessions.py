"""``contextledger sessions`` and ``contextledger show``: list sessions, print one's history."""

from __future__ import annotations

from typing import Annotated

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

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``sessions`` and ``show`` to ``app``."""

    @command(app, "sessions", example="contextledger sessions --db sqlite:///agent.db --json")
    def sessions_command(db: DbOption = None, json_output: JsonOption = False) -> None:
        """List the stored sessions with their event counts (--json: {"sessions": [SessionInfo]})."""

        def body() -> None:
            from rich.table import Table  # noqa: PLC0415 - rich loads only when a command prints

            with ledger_for(db) as ledger:
                infos = ledger.sessions()
            if json_output:
                emit_json({"sessions": infos})
                return
            table = Table("session", "events", "model", "source", "started")
            for info in infos:
                started = info.started_at.isoformat(timespec="seconds") if info.started_at else ""
                table.add_row(*map(cell, (info.session_id, info.events, info.model, info.source, started)))
            console = out_console()
            console.print(table)
            console.print(f"{len(infos)} sessions")

        run_guarded(body, json_output=json_output)

    @command(app, "show", example="contextledger show 0f3c9a... --db sqlite:///agent.db --json")
    def show_command(
        session_id: Annotated[str, typer.Argument(help="The session to print.")],
        db: DbOption = None,
        json_output: JsonOption = False,
    ) -> None:
        """Print a session's stored events with their positions.

        --json prints {"session_id", "events": [{"position", "event"}...]}.
        """

        def body() -> None:
            from contextledger.adapters.cli.history import event_documents, print_history  # noqa: PLC0415 - rich loads lazily

            with ledger_for(db) as ledger:
                events = ledger.events(session_id)
            if json_output:
                emit_json({"session_id": session_id, "events": event_documents(events)})
                return
            print_history(out_console(), events)

        run_guarded(body, json_output=json_output)
