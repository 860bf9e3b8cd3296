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
from contextledger.domain.errors import ValidationError

__all__ = ["parse_span", "register"]


def parse_span(text: str) -> tuple[int, int]:
    """Return (first, last) of ``N`` or ``FIRST-LAST``; raise ``ValidationError`` otherwise."""
    first, _, last = text.partition("-")
    try:
        span = (int(first), int(last or first))
    except ValueError:
        raise ValidationError(f"not a position or a span FIRST-LAST: {text!r}") from None
    if not 1 <= span[0] <= span[1]:
        raise ValidationError(f"a span needs 1 <= FIRST <= LAST, got {text!r}")
    return span


def register(app: typer.Typer) -> None:
    """Add ``pin`` and ``unpin`` to ``app``."""

    @command(app, "pin", example='contextledger pin 0f3c9a... 1234 --reason "the schema is needed again"')
    def pin_command(
        session_id: Annotated[str, typer.Argument(help="The session.")],
        position: Annotated[
            str, typer.Argument(help="The position a stub names ('restore: seq N'), or a span FIRST-LAST.")
        ],
        reason: Annotated[str, typer.Option("--reason", help="Why (kept in the log).")] = "",
        db: DbOption = None,
        json_output: JsonOption = False,
    ) -> None:
        """Pin POSITION: the next render shows it verbatim (stubbed, dropped or summarized) and keeps it.

        A span FIRST-LAST pins every message in it (undoing a compaction). New events; the log is never
        edited. --json prints {"session_id", "position", "pin_position"} (a span: "pin_positions").
        """

        def body() -> None:
            first, last = parse_span(position)
            with ledger_for(db) as ledger:
                if "-" in position:
                    pins = ledger.pin_span(session_id, first, last, reason)
                    document: dict[str, object] = {"pin_positions": list(pins)}
                else:
                    document = {"pin_position": ledger.pin(session_id, first, reason)}
            if json_output:
                shown: object = position if "-" in position else first
                emit_json({"session_id": session_id, "position": shown, **document})
                return
            out_console().print(f"pinned {position} of {session_id}")

        run_guarded(body, json_output=json_output)

    @command(app, "unpin", example="contextledger unpin 0f3c9a... 1234")
    def unpin_command(
        session_id: Annotated[str, typer.Argument(help="The session.")],
        position: Annotated[str, typer.Argument(help="The pinned position, or a span FIRST-LAST.")],
        db: DbOption = None,
        json_output: JsonOption = False,
    ) -> None:
        """Lift a pin of POSITION (or of every message of FIRST-LAST): what it brought back leaves again.

        --json prints {"session_id", "position", "unpin_position"} (a span: "unpin_positions").
        """

        def body() -> None:
            first, last = parse_span(position)
            with ledger_for(db) as ledger:
                if "-" in position:
                    document: dict[str, object] = {
                        "unpin_positions": list(ledger.unpin_span(session_id, first, last))
                    }
                else:
                    document = {"unpin_position": ledger.unpin(session_id, first)}
            if json_output:
                shown: object = position if "-" in position else first
                emit_json({"session_id": session_id, "position": shown, **document})
                return
            out_console().print(f"unpinned {position} of {session_id}")

        run_guarded(body, json_output=json_output)
