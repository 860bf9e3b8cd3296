"""``contextledger sessions`` and ``contextledger show``: list sessions, print one's history."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import msgspec
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
    use_cases,
)
from contextledger.adapters.cli.ids import id_column, session_ledger

if TYPE_CHECKING:
    from contextledger.application.kernel.ledger import Ledger

__all__ = ["register", "session_card"]


def register(app: typer.Typer) -> None:
    """Add ``sessions`` and ``show`` to ``app``."""

    @command(app, "sessions", example="contextledger sessions --db sqlite:///agent.db --json")
    def sessions_command(db: DbOption = None, json_output: JsonOption = False) -> None:
        """List the stored sessions with their event counts (--json: {"sessions": [SessionInfo]})."""

        def body() -> None:
            from contextledger.application.kernel.id_prefixes import short_ids  # noqa: PLC0415
            from rich.table import Table  # noqa: PLC0415 - rich loads only when a command prints

            with ledger_for(db) as ledger:
                infos = ledger.sessions()
            if json_output:
                emit_json({"sessions": infos})
                return
            short = short_ids(info.session_id for info in infos)
            table = Table(id_column("session", short.values()), "events", "model", "source", "started")
            for info in infos:
                started = info.started_at.isoformat(timespec="seconds") if info.started_at else ""
                shown = short[info.session_id]
                table.add_row(*map(cell, (shown, info.events, info.model, info.source, started)))
            console = out_console()
            console.print(table)
            console.print(f"{len(infos)} sessions (ids: unique prefixes every command takes; --json: whole)")

        run_guarded(body, json_output=json_output)

    @command(app, "show", example="contextledger show 0f3c9a... --db sqlite:///agent.db --json")
    def show_command(
        session_id: Annotated[str, typer.Argument(help="The session to print (an id or a unique prefix).")],
        db: DbOption = None,
        json_output: JsonOption = False,
    ) -> None:
        """Print a session's stored events with positions, then its summaries and its session-state card.

        --json: {"session_id", "events": [{"position", "event"}...], "summaries": [SummaryRecorded + "text"],
        "card": the session-state card's text or null}.
        """

        def body() -> None:
            from contextledger.adapters.cli.history import (  # noqa: PLC0415 - rich loads lazily
                event_documents,
                print_history,
                print_summaries,
            )

            with session_ledger(db, session_id) as (ledger, session):
                events = ledger.events(session)
                summaries = [(s, ledger.text(s.content)) for s in ledger.summaries(session)]
                card = session_card(ledger, session)
            if json_output:
                shown = [{**msgspec.to_builtins(s), "text": text} for s, text in summaries]
                emit_json(
                    {
                        "session_id": session,
                        "events": event_documents(events),
                        "summaries": shown,
                        "card": card,
                    }
                )
                return
            console = out_console()
            print_history(console, events)
            print_summaries(console, summaries)
            if card is not None:
                console.print(cell(card))

        run_guarded(body, json_output=json_output)


def session_card(ledger: Ledger, session_id: str) -> str | None:
    """The session-state card as it stands after the last event (None: the session has nothing to show on it).

    Rendered under the default policy with the card at the tail, where it is refreshed after every
    event (in the stable prefix, the model is shown it as of the last compaction point).
    """
    from contextledger.projections.card_state import CardConfig  # noqa: PLC0415 - loaded on use
    from contextledger.projections.presets import PRESETS  # noqa: PLC0415

    now = PRESETS["default"].model_copy(update={"card": CardConfig(placement="tail")})
    context = use_cases().renderer(ledger, "cl100k_base").render(session_id, now)
    return next((m.text for m in context.messages if m.kind == "card"), None)
