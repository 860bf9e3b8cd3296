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
    ledger_for,
    out_console,
    run_guarded,
)

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``export`` to ``app``."""

    @command(app, "export", example="contextledger export 0f3c9a... --otlp spans.json")
    def export_command(
        session_id: Annotated[str, typer.Argument(help="The session.")],
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

            with ledger_for(db) as ledger:
                ledger.version(session_id)
                spans = export_otlp(ledger, session_id, otlp, content=content)
            if json_output:
                emit_json({"session_id": session_id, "path": str(otlp), "spans": spans})
                return
            out_console().print(f"wrote {spans} spans of {session_id} to {otlp}")

        run_guarded(body, json_output=json_output)
