"""``contextledger demo``: record a realistic tool-using session on the embedded ledger and show it."""

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
from contextledger.adapters.cli.demo_session import DEMO_SYSTEM_PROMPT, DEMO_TOOLS, demo_messages
from contextledger.adapters.cli.history import history_rows, print_history
from contextledger.adapters.cli.render_cmd import print_context, render_payload
from contextledger.application.renderer import Renderer

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add the ``demo`` command to ``app``."""

    @app.command()
    def demo(
        db: DbOption = "sqlite:///contextledger-demo.db",
        json_output: JsonOption = False,
        budget: Annotated[
            int, typer.Option("--budget", help="Prompt budget of the rendered context shown at the end.")
        ] = 2_500,
    ) -> None:
        """Record a multi-turn, tool-using coding session, print what was stored and the context to send."""

        def body() -> None:
            with ledger_for(db) as ledger:
                session_id = ledger.start_session(
                    system_prompt=DEMO_SYSTEM_PROMPT,
                    model="gpt-4o",
                    tools=DEMO_TOOLS,
                    metadata={"source_format": "demo", "repository": "money"},
                )
                for message in demo_messages():
                    ledger.append(session_id, message)
                rows = history_rows(ledger, session_id)
                context = Renderer(ledger).render(session_id, "default", budget=budget)
                if json_output:
                    emit_json(
                        {
                            "db": ledger.store_url,
                            "session_id": session_id,
                            "events": rows,
                            "render": render_payload(context, "openai"),
                        }
                    )
                    return
                console.print(f"Recorded session [bold]{session_id}[/bold] in {ledger.store_url}")
                print_history(console, rows)
                info = next(s for s in ledger.sessions() if s.session_id == session_id)
                console.print(
                    f"{info.events} events stored; the log is append-only and replays to this table."
                )
                console.print(
                    f"\nThe context to send next under policy 'default' within {budget:,} tokens "
                    "(a projection of the log; the log itself is unchanged):"
                )
                print_context(context)

        run_guarded(body)
