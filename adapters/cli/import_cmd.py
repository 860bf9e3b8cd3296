"""``contextledger import``: agent transcripts in seven formats, one ledger session per source session."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Literal

import typer
from contextledger.adapters.cli.common import (
    DbOption,
    JsonOption,
    console,
    emit_json,
    err_console,
    ledger_for,
    run_guarded,
)
from contextledger.adapters.importers.service import FileImport, import_file
from contextledger.application.ledger import Ledger
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

__all__ = ["LARGE_FILE_BYTES", "FormatName", "register"]

LARGE_FILE_BYTES = 256 * 1024
"""Files at least this large get a progress bar on stderr (unless ``--json``)."""

FormatName = Literal[
    "auto",
    "openai",
    "anthropic",
    "claude-code",
    "swe-agent",
    "mini-swe-agent",
    "openhands",
    "aider",
    "tau-bench",
]
"""``--format`` choices: ``auto`` plus every importer's format (a test keeps it equal to ``FORMATS``)."""


@contextmanager
def _progress_bar(enabled: bool) -> Iterator[Progress | None]:
    if not enabled:
        yield None
        return
    columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"))
    with Progress(*columns, TimeElapsedColumn(), console=err_console, transient=True) as bar:
        yield bar


def _import_one(ledger: Ledger, path: Path, fmt: str, show_progress: bool) -> FileImport:
    large = show_progress and path.is_file() and path.stat().st_size >= LARGE_FILE_BYTES
    with _progress_bar(large) as bar:
        tasks: dict[str, TaskID] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if bar is None:
                return
            if stage not in tasks:
                tasks[stage] = bar.add_task(f"{stage} {path.name}", total=total)
            bar.update(tasks[stage], completed=done, total=total)

        return import_file(ledger, path, fmt, progress)


def _print_human(outcomes: list[FileImport]) -> None:
    table = Table("session", "format", "status", "messages", "calls", "results", "unpaired", "notes")
    for outcome in outcomes:
        for report in outcome.sessions:
            table.add_row(
                report.session_id or "",
                report.format,
                report.status,
                str(report.messages),
                str(report.tool_calls),
                str(report.tool_results),
                str(report.unpaired_calls),
                str(len(report.notes)),
            )
    console.print(table)
    notes = Counter(note for outcome in outcomes for report in outcome.sessions for note in report.notes)
    for note, sessions in notes.items():
        console.print(f"  note ({sessions} session{'s' if sessions > 1 else ''}): {note}", markup=False)
    imported = sum(1 for o in outcomes for r in o.sessions if r.status == "imported")
    unchanged = sum(1 for o in outcomes for r in o.sessions if r.status == "unchanged")
    failed = sum(1 for o in outcomes if not o.ok)
    console.print(f"{imported} sessions imported, {unchanged} unchanged, {failed} files failed")


def register(app: typer.Typer) -> None:
    """Add the ``import`` command to ``app``."""

    @app.command("import")
    def import_command(
        files: Annotated[list[Path], typer.Argument(help="Transcript files to import.")],
        fmt: Annotated[
            FormatName, typer.Option("--format", help="Transcript format; auto detects it from the content.")
        ] = "auto",
        db: DbOption = None,
        json_output: JsonOption = False,
    ) -> None:
        """Import agent transcripts; each source session becomes one ledger session (idempotent)."""
        failures: list[FileImport] = []

        def body() -> None:
            with ledger_for(db) as ledger:
                outcomes = [_import_one(ledger, path, fmt, not json_output) for path in files]
            for outcome in outcomes:
                if outcome.error is not None:
                    failures.append(outcome)
                    err_console.print(f"error: {outcome.error}", markup=False)
            if json_output:
                emit_json([report for outcome in outcomes for report in outcome.reports()])
            else:
                _print_human(outcomes)

        run_guarded(body)
        if failures:
            raise typer.Exit(1)
