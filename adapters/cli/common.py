"""Shared CLI plumbing: options, opening the ledger, printing JSON, one-line errors."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import contextledger
import msgspec
import typer
from contextledger.adapters.logging_setup import configure_logging
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


@contextmanager
def ledger_for(db: str | None) -> Iterator[contextledger.Ledger]:
    """Open the ledger for a command and close it afterwards."""
    ledger = contextledger.open_ledger(db)
    try:
        yield ledger
    finally:
        ledger.close()


def run_guarded(body: Callable[[], None], *, log_json: bool = False) -> None:
    """Run a command body; turn any ``ContextLedgerError`` into one line and exit code 1."""
    configure_logging(json=log_json)
    try:
        body()
    except contextledger.ContextLedgerError as error:
        raise fail(f"{type(error).__name__}: {error}") from None
