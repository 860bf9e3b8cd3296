"""``pin`` and ``unpin``: bring an evicted event back verbatim in the next render, or let it go again."""

from __future__ import annotations

from typing import Annotated

import typer
from contextledger.adapters.cli.common import (
    DbOption,
    JsonOption,
    command,
    emit_json,
    ledger_for,
    out_console,
    run_guarded,
)

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``pin`` and ``unpin`` to ``app``."""

    @command(app, "pin", example='contextledger pin 0f3c9a... 1234 --reason "the schema is needed again"')
    def pin_command(
        session_id: Annotated[str, typer.Argument(help="The session.")],
        position: Annotated[
            int, typer.Argument(help="The position to pin (a stub names it: 'restore: seq N').")
        ],
        reason: Annotated[str, typer.Option("--reason", help="Why (kept in the log).")] = "",
        db: DbOption = None,
        json_output: JsonOption = False,
    ) -> None:
        """Pin POSITION: the next render shows it verbatim (stubbed, dropped or summarized) and keeps it.

        A new event; the log is never edited. --json prints {"session_id", "position", "pin_position"}.
        """

        def body() -> None:
            with ledger_for(db) as ledger:
                at = ledger.pin(session_id, position, reason)
            if json_output:
                emit_json({"session_id": session_id, "position": position, "pin_position": at})
                return
            out_console().print(f"pinned position {position} of {session_id} (pin recorded at {at})")

        run_guarded(body, json_output=json_output)

    @command(app, "unpin", example="contextledger unpin 0f3c9a... 1234")
    def unpin_command(
        session_id: Annotated[str, typer.Argument(help="The session.")],
        position: Annotated[int, typer.Argument(help="The pinned position.")],
        db: DbOption = None,
        json_output: JsonOption = False,
    ) -> None:
        """Lift a pin of POSITION: what the pin brought back leaves the next render again.

        --json prints {"session_id", "position", "unpin_position"}.
        """

        def body() -> None:
            with ledger_for(db) as ledger:
                at = ledger.unpin(session_id, position)
            if json_output:
                emit_json({"session_id": session_id, "position": position, "unpin_position": at})
                return
            out_console().print(f"unpinned position {position} of {session_id} (recorded at {at})")

        run_guarded(body, json_output=json_output)
