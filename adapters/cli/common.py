"""Shared CLI plumbing: options, opening the ledger, printing JSON, one-line errors."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import msgspec
import typer
from contextledger.adapters.logging_setup import configure_logging
from contextledger.application.ledger import Ledger
from contextledger.domain.errors import ConfigError, ContextLedgerError
from rich.console import Console

__all__ = [
    "DbOption",
    "JsonOption",
    "console",
    "emit_json",
    "err_console",
    "fail",
    "ledger_for",
    "run_guarded",
    "use_ledger_opener",
]

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="Database URL (sqlite:///path.db, postgresql://..., memory://); "
        "default $CONTEXTLEDGER_DB or sqlite:///contextledger.db",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]

console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)
"""Progress bars and notes go to stderr so stdout stays clean for --json."""


def emit_json(value: Any) -> None:
    """Print ``value`` as JSON on stdout (msgspec Structs and datetimes included)."""
    sys.stdout.write(json.dumps(msgspec.to_builtins(value), ensure_ascii=False, indent=2) + "\n")


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print one clear error line on stderr and return the exit to raise."""
    sys.stderr.write("error: " + " ".join(message.split()) + "\n")
    return typer.Exit(code)


_opener: list[Callable[[str | None], Ledger]] = []
"""How commands open a ledger; installed once by the composition root (``contextledger.cli``)."""


def use_ledger_opener(open_ledger: Callable[[str | None], Ledger]) -> None:
    """Install the function that opens the ledger a ``--db`` URL names."""
    _opener[:] = [open_ledger]


@contextmanager
def ledger_for(db: str | None) -> Iterator[Ledger]:
    """Open the ledger for a command and close it afterwards."""
    if not _opener:
        msg = "the CLI was started without a ledger opener: run it through contextledger.cli.main"
        raise ConfigError(msg)
    ledger = _opener[0](db)
    try:
        yield ledger
    finally:
        ledger.close()


def run_guarded(body: Callable[[], None], *, log_json: bool = False) -> None:
    """Run a command body; turn any ``ContextLedgerError`` into one line and exit code 1."""
    configure_logging(json=log_json)
    try:
        body()
    except ContextLedgerError as error:
        raise fail(f"{type(error).__name__}: {error}") from None
