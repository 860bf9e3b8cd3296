"""``export``: a session's model-call records as OpenTelemetry GenAI spans, OTLP JSON in a file."""

from __future__ import annotations

from pathlib import Path
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
    """Add ``export`` to ``app``."""

    @command(app, "export", example="contextledger export 0f3c9a... --otlp spans.json")
    def export_command(
        session_id: Annotated[str, typer.Argument(help="The session (an id or a unique prefix).")],
        otlp: Annotated[Path, typer.Option("--otlp", help="Write OTLP/HTTP JSON spans to this file.")],
        content: Annotated[
            bool,
            typer.Option(
                "--content",
                help="Add each call's messages (gen_ai.input.messages) as rendered again from the log.",
            ),
        ] = False,
        db: DbOption = None,
        json_output: JsonOption = False,
    ) -> None:
        """Write SESSION's recorded calls as GenAI spans (a child span per compaction) to --otlp.

        The file is an OTLP/HTTP JSON ExportTraceServiceRequest: post it to a collector's /v1/traces or
        open it in a tool that reads OTLP JSON. --content adds the conversation's text (off by default:
        spans often leave the machine); a summary is the GenAI conventions' "compaction" part.
        --json prints {"session_id", "path", "spans"}.
        """

        def body() -> None:
            from contextledger.adapters.otel import export_otlp  # noqa: PLC0415

            with session_ledger(db, session_id) as (ledger, session):
                spans = export_otlp(ledger, session, otlp, content=content)
            if json_output:
                emit_json({"session_id": session, "path": str(otlp), "spans": spans})
                return
            out_console().print(f"wrote {spans} spans of {session} to {otlp}")

        run_guarded(body, json_output=json_output)
