"""``contextledger demo``: record a realistic tool-using session on the embedded ledger and show it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from contextledger.adapters.cli.common import (
    JsonOption,
    cell,
    command,
    emit_json,
    ledger_for,
    out_console,
    run_guarded,
    use_cases,
)

if TYPE_CHECKING:
    from contextledger.application.kernel.ledger import Ledger
    from contextledger.projections.context import RenderedContext

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add the ``demo`` command to ``app``."""

    @command(app, "demo", example="contextledger demo --db sqlite:///demo.db --budget 2500")
    def demo(
        db: Annotated[
            str,
            typer.Option(
                "--db",
                help="Database URL the demo writes to (sqlite:///path.db, postgresql://..., memory://); "
                "its own file unless given.",
            ),
        ] = "sqlite:///contextledger-demo.db",
        json_output: JsonOption = False,
        budget: Annotated[
            int, typer.Option("--budget", help="Prompt budget of the rendered context shown at the end.")
        ] = 2_500,
    ) -> None:
        """Record a multi-turn, tool-using coding session, print what was stored and the context to send.

        --json prints {"store_url", "session_id", "events": [{"position", "event"}...],
        "render": {...as render --json}}.
        """

        def body() -> None:
            from contextledger.adapters.cli.demo_session import (  # noqa: PLC0415 - loaded on use
                DEMO_SYSTEM_PROMPT,
                DEMO_TOOLS,
                demo_messages,
            )
            from contextledger.adapters.cli.history import event_documents, print_history  # noqa: PLC0415 - loaded on use
            from contextledger.adapters.cli.render_cmd import (  # noqa: PLC0415 - loaded on use
                print_context,
                render_document,
            )
            from rich.text import Text  # noqa: PLC0415 - rich loads only when a command prints

            def record(ledger: Ledger) -> str:
                session_id = ledger.start_session(
                    system_prompt=DEMO_SYSTEM_PROMPT,
                    model="gpt-4o",
                    tools=DEMO_TOOLS,
                    metadata={"source_format": "demo", "repository": "money"},
                )
                for message in demo_messages():
                    ledger.append(session_id, message)
                return session_id

            def shown(ledger: Ledger, session_id: str) -> RenderedContext:
                return (
                    use_cases().renderer(ledger, "cl100k_base").render(session_id, "default", budget=budget)
                )

            with ledger_for("memory://") as scratch:  # the budget tried first: one it refuses writes nothing
                shown(scratch, record(scratch))
            with ledger_for(db, create=True) as ledger:
                session_id = record(ledger)
                events = ledger.events(session_id)
                context = shown(ledger, session_id)
                store_url = ledger.store_url
            if json_output:
                emit_json(
                    {
                        "store_url": store_url,
                        "session_id": session_id,
                        "events": event_documents(events),
                        "render": render_document(context, "openai"),
                    }
                )
                return
            console = out_console()
            console.print(Text.assemble("Recorded session ", cell(session_id, "bold"), f" in {store_url}"))
            print_history(console, events)
            console.print(f"{len(events)} events stored; the log is append-only and replays to this table.")
            console.print(
                f"\nThe context to send next under policy 'default' within {budget:,} tokens "
                "(a projection of the log; the log itself is unchanged):"
            )
            print_context(context)

        run_guarded(body, json_output=json_output)
