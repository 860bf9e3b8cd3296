"""``contextledger import``: agent transcripts in seven formats, one ledger session per source session."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer
from contextledger.adapters.cli.common import (
    DbOption,
    JsonOption,
    cell,
    command,
    emit_json,
    err_console,
    fail,
    ledger_for,
    out_console,
    run_guarded,
)
from contextledger.adapters.cli.ids import id_column
from contextledger.adapters.cli.progress import progress_shown, step_bar

if TYPE_CHECKING:
    from contextledger.adapters.importers.service import FileImport
    from contextledger.application.kernel.ledger import Ledger
    from rich.progress import Progress, TaskID

__all__ = ["LARGE_FILE_BYTES", "FormatName", "register"]

LARGE_FILE_BYTES = 256 * 1024
"""Files at least this large get a progress bar of their own on stderr (a terminal, no ``--json``)."""

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
    from rich.progress import (  # noqa: PLC0415 - rich loads only when a command prints
        BarColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    columns = (
        TextColumn("{task.description}", markup=False),  # file names are data, never markup
        BarColumn(),
        TextColumn("{task.completed}/{task.total}", markup=False),
    )
    with Progress(*columns, TimeElapsedColumn(), console=err_console(), transient=True) as bar:
        yield bar


def _import_one(ledger: Ledger, path: Path, fmt: str, show_progress: bool) -> FileImport:
    from contextledger.adapters.importers.service import import_file  # noqa: PLC0415 - loaded on use

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


def _document(outcomes: list[FileImport]) -> dict[str, Any]:
    """``import --json``: one object per file with the API's fields (``FileImport``, ``ImportReport``)."""
    files = [
        {
            "path": outcome.path,
            "format": outcome.format,
            "ok": outcome.ok,
            "sessions": outcome.reports(),
            "error": outcome.error,
        }
        for outcome in outcomes
    ]
    reports = [report for outcome in outcomes for report in outcome.sessions]
    return {
        "files": files,
        "imported": sum(1 for r in reports if r.status == "imported"),
        "unchanged": sum(1 for r in reports if r.status == "unchanged"),
        "failed_files": sum(1 for o in outcomes if not o.ok),
    }


def _print_human(outcomes: list[FileImport]) -> None:
    from rich.table import Table  # noqa: PLC0415 - rich loads only when a command prints

    console = out_console()
    ids = [str(report.session_id) for outcome in outcomes for report in outcome.sessions]
    table = Table(  # the ids this prints are the ones to copy: folded when squeezed, never cut
        id_column("session", ids), "format", "status", "messages", "calls", "results", "unpaired", "notes"
    )
    for column in table.columns[1:]:  # a format, a status or a count cut to "tau-ben…" says nothing
        column.overflow = "fold"
    for outcome in outcomes:
        for report in outcome.sessions:
            row = (
                report.session_id,
                report.format,
                report.status,
                report.messages,
                report.tool_calls,
                report.tool_results,
                report.unpaired_calls,
                len(report.notes),
            )
            table.add_row(*map(cell, row))
    console.print(table)
    notes = Counter(note for outcome in outcomes for report in outcome.sessions for note in report.notes)
    for note, sessions in notes.items():
        console.print(f"  note ({sessions} session{'s' if sessions > 1 else ''}): {note}")
    imported = sum(1 for o in outcomes for r in o.sessions if r.status == "imported")
    unchanged = sum(1 for o in outcomes for r in o.sessions if r.status == "unchanged")
    failed = sum(1 for o in outcomes if not o.ok)
    console.print(f"{imported} sessions imported, {unchanged} unchanged, {failed} files failed")


def register(app: typer.Typer) -> None:
    """Add the ``import`` command to ``app``."""

    @command(
        app,
        "import",
        example="contextledger import session.jsonl run.traj --db sqlite:///agent.db --json",
    )
    def import_command(
        files: Annotated[list[Path], typer.Argument(help="Transcript files to import.")],
        fmt: Annotated[
            FormatName, typer.Option("--format", help="Transcript format; auto detects it from the content.")
        ] = "auto",
        db: DbOption = None,
        json_output: JsonOption = False,
    ) -> None:
        """Import agent transcripts; each source session becomes one ledger session (idempotent).

        --json prints {"files": [{"path", "format", "ok", "sessions": [ImportReport...], "error"}], ...}.
        A file that fails imports nothing; the others still import, and the exit code is 1.
        """

        def body() -> None:
            shown = progress_shown(json_output=json_output)
            outcomes: list[FileImport] = []
            bar = step_bar("importing", shown=shown and len(files) > 1)
            with ledger_for(db, create=True) as ledger, bar as advance:
                for done, path in enumerate(files):
                    advance(done, len(files), path.name)
                    outcomes.append(_import_one(ledger, path, fmt, shown and len(files) == 1))
                advance(len(files), len(files), "")
            failures = [outcome for outcome in outcomes if outcome.error is not None]
            if not json_output:
                for outcome in failures:
                    err_console().print(f"error: {outcome.error}")
            if json_output:
                emit_json(_document(outcomes))
            else:
                _print_human(outcomes)
            if failures:
                names = ", ".join(outcome.path for outcome in failures)
                message = f"{len(failures)} of {len(outcomes)} files failed to import: {names}"
                raise fail(message, json_output=json_output, error_type="TranscriptImportError")

        run_guarded(body, json_output=json_output)
