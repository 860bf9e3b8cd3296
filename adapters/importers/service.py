"""Import transcript files into a ledger: parse and validate a whole file, then write it idempotently."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from contextledger.adapters.importers.aider import parse_aider
from contextledger.adapters.importers.anthropic_messages import parse_anthropic
from contextledger.adapters.importers.base import ImportReport, PreparedSession, SessionDraft, prepare
from contextledger.adapters.importers.claude_code import parse_claude_code
from contextledger.adapters.importers.detect import detect_format
from contextledger.adapters.importers.mini_swe_agent import parse_mini_swe_agent
from contextledger.adapters.importers.openai_chat import parse_openai, parse_tau_bench
from contextledger.adapters.importers.openhands_events import parse_openhands
from contextledger.adapters.importers.source import Source
from contextledger.adapters.importers.swe_agent import parse_swe_agent
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.kernel.session_port import SessionSpec
from contextledger.domain.errors import (
    ConfigError,
    SessionForgottenError,
    TranscriptImportError,
    ValidationError,
)

__all__ = [
    "FORMATS",
    "PARSERS",
    "FileImport",
    "Progress",
    "import_file",
    "import_files",
    "open_file",
    "parse_file",
]

Progress = Callable[[str, int, int], None]
"""Called with a stage (``parse`` or ``write``), units done and units in total."""

PARSERS: dict[str, Callable[[Source], Iterable[SessionDraft]]] = {
    "openai": parse_openai,
    "anthropic": parse_anthropic,
    "claude-code": parse_claude_code,
    "swe-agent": parse_swe_agent,
    "mini-swe-agent": parse_mini_swe_agent,
    "openhands": parse_openhands,
    "aider": parse_aider,
    "tau-bench": parse_tau_bench,
}

FORMATS = tuple(PARSERS)
"""Every format name ``--format`` accepts besides ``auto``."""


@dataclass
class FileImport:
    """The outcome of importing one file: its format, one report per session, or the error."""

    path: str
    format: str | None = None
    sessions: list[ImportReport] = field(default_factory=list)
    error: TranscriptImportError | None = None

    @property
    def ok(self) -> bool:
        """True when the file imported (or was already imported) completely."""
        return self.error is None

    def reports(self) -> list[ImportReport]:
        """Return the session reports, or one ``failed`` report naming the error."""
        if self.error is None:
            return self.sessions
        return [
            ImportReport(
                session_id=None,
                format=self.format or "unknown",
                source=self.path,
                status="failed",
                error=f"{self.error.location}: {self.error.problem}",
            )
        ]


def _stored_metadata(prepared: PreparedSession) -> dict[str, object]:
    draft = prepared.draft
    return draft.metadata | {
        "source_format": draft.source_format,
        "source": draft.source,
        "source_ref": draft.source_ref,
        "native_id": draft.native_id,
        "source_messages": draft.source_messages,
        "import_notes": list(draft.notes),
    }


def open_file(path: str | Path, fmt: str = "auto") -> tuple[str, Iterator[PreparedSession]]:
    """Read and detect a file; return its format and its sessions, each parsed and validated as drawn.

    Raises:
        TranscriptImportError: the file cannot be read or matches no format; drawing a session raises
            it when that session is invalid or repeats an earlier one of the file.
        ConfigError: ``fmt`` names no known format.
    """
    if fmt != "auto" and fmt not in PARSERS:
        msg = f"unknown transcript format {fmt!r}: expected auto or one of {', '.join(FORMATS)}"
        raise ConfigError(msg)
    source = Source.read(path)
    chosen = detect_format(source) if fmt == "auto" else fmt
    return chosen, _prepared(source, PARSERS[chosen])


def _prepared(
    source: Source, parser: Callable[[Source], Iterable[SessionDraft]]
) -> Iterator[PreparedSession]:
    """Parse as drawn (a bad file fails with its format known); validate each draft as it comes.

    A session identical to an earlier one of the file is refused.
    """
    seen: dict[str, str] = {}
    for draft in parser(source):
        session = prepare(draft)
        if session.session_id in seen:
            where = session.draft.source_ref or session.draft.native_id
            problem = f"session identical to {seen[session.session_id]} (same identity and content)"
            raise source.error(where, problem)
        seen[session.session_id] = session.draft.source_ref or session.draft.native_id
        yield session


def parse_file(path: str | Path, fmt: str = "auto") -> tuple[str, list[PreparedSession]]:
    """Read, detect, parse and validate every session of a file; write nothing.

    Raises:
        TranscriptImportError: the file cannot be read, matches no format, or any session is invalid.
        ConfigError: ``fmt`` names no known format.
    """
    chosen, sessions = open_file(path, fmt)
    return chosen, list(sessions)


def _spec(session: PreparedSession) -> SessionSpec:
    """The ``start_session`` keywords that store one prepared session."""
    return {
        "session_id": session.session_id,
        "system_prompt": session.draft.system_prompt,
        "model": session.draft.model,
        "tools": session.draft.tools,
        "metadata": _stored_metadata(session),
        "messages": session.messages,
        "at": session.draft.started_at,
        "unknown_time": session.draft.started_at is None,
        "idempotency_key": session.idempotency_key,
    }


def _write(
    ledger: Ledger, sessions: Iterable[PreparedSession], progress: Progress | None
) -> list[ImportReport]:
    """Store the sessions not stored yet as they are drawn, in ONE transaction; return every report.

    Each session is parsed, validated, checked against the ledger and written before the next is
    drawn, so only one session's objects are held at a time (ADR 0041). A session id already taken
    by other content, or any error while drawing, rolls the whole file back: nothing is stored.
    """
    reports: list[ImportReport] = []
    written: list[ImportReport] = []

    def specs() -> Iterator[SessionSpec]:
        for session in sessions:
            reports.append(session.report)
            if ledger.log.lookup_idempotency_key(session.session_id, session.idempotency_key) is not None:
                ledger.log.read(session.session_id, after=0, upto=1)  # forgotten since: SessionForgottenError
                session.report.status = "unchanged"
            elif ledger.log.version(session.session_id) > 0:
                where = session.draft.source_ref or session.draft.native_id
                problem = f"session id {session.session_id!r} already exists with other content"
                raise TranscriptImportError(session.draft.source, where, problem)
            else:
                written.append(session.report)
                yield _spec(session)
        if progress is not None:
            progress("parse", 1, 1)

    ledger.start_sessions(specs())
    for report in written:
        report.status = "imported"
    if progress is not None and written:
        progress("write", len(written), len(written))
    return reports


def import_file(
    ledger: Ledger, path: str | Path, fmt: str = "auto", progress: Progress | None = None
) -> FileImport:
    """Import one file: its sessions are parsed, validated and written one at a time, in one transaction.

    A bad file yields a ``FileImport`` with its ``TranscriptImportError`` and nothing written.
    Sessions already imported (same id and idempotency key) are reported ``unchanged``.
    """
    outcome = FileImport(str(path))
    try:
        if progress is not None:
            progress("parse", 0, 1)
        outcome.format, sessions = open_file(path, fmt)
        reports = _write(ledger, sessions, progress)
    except TranscriptImportError as error:
        outcome.error = error
        return outcome
    except (ValidationError, SessionForgottenError) as error:  # a forgotten session stays forgotten
        outcome.error = TranscriptImportError(str(path), "ledger", str(error))
        return outcome
    except (RecursionError, MemoryError) as error:
        # A pathological file (nesting past the interpreter's limit, or too large to hold) fails alone:
        # nothing of it was written, and the other files of the command still import.
        problem = "too large to process"
        if isinstance(error, RecursionError):
            problem = "nested too deeply to process (arrays and objects about 1,000 levels deep)"
        outcome.error = TranscriptImportError(str(path), "file", problem)
        return outcome
    outcome.sessions = reports
    return outcome


def import_files(
    ledger: Ledger, paths: list[str | Path], fmt: str = "auto", progress: Progress | None = None
) -> list[FileImport]:
    """Import several files independently: one bad file does not stop the others."""
    return [import_file(ledger, path, fmt, progress) for path in paths]
