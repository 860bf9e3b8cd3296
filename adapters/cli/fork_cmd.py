"""``fork``: start a session that continues another after a position (seed 000), nothing copied."""

from __future__ import annotations

from typing import Annotated

import typer
from contextledger.adapters.cli.common import (
    DbOption,
    JsonOption,
    command,
    emit_json,
    out_console,
    run_guarded,
)
from contextledger.adapters.cli.ids import session_ledger

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``fork`` to ``app``."""

    @command(app, "fork", example="contextledger fork 0f3c9a... --at 120 --from-summary --json")
    def fork_command(
        session_id: Annotated[str, typer.Argument(help="The parent session (an id or a unique prefix).")],
        at: Annotated[int, typer.Option("--at", help="The last position of the parent the child keeps.")],
        from_summary: Annotated[
            bool,
            typer.Option(
                "--from-summary", help="Start from the summary in force there, not the full history."
            ),
        ] = False,
        db: DbOption = None,
        json_output: JsonOption = False,
    ) -> None:
        """Fork SESSION at --at: a new session reads the parent's events 1..AT, then its own.

        The parent is not written. --json prints {"session_id", "parent", "at", "from_summary", "summary_id"}.
        """

        def body() -> None:
            with session_ledger(db, session_id) as (ledger, parent):
                child = ledger.fork(parent, at, from_summary=from_summary)
                summaries = ledger.summaries(child)
            document = {
                "session_id": child,
                "parent": parent,
                "at": at,
                "from_summary": from_summary,
                "summary_id": summaries[0].summary_id if summaries else None,
            }
            if json_output:
                emit_json(document)
                return
            start = f"from summary {document['summary_id']}" if from_summary else "from the full history"
            out_console().print(f"forked {parent} at {at} into {child} ({start})")

        run_guarded(body, json_output=json_output)
