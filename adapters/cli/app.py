"""The ``contextledger`` command: typer app that registers every command module."""

from __future__ import annotations

from collections.abc import Callable

import typer
from contextledger.adapters.cli import common, demo, import_cmd, render_cmd, sessions
from contextledger.application.ledger import Ledger

__all__ = ["app", "run"]

app = typer.Typer(
    name="contextledger",
    help="The context layer of LLM agents, event-sourced.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

for module in (demo, sessions, import_cmd, render_cmd):
    module.register(app)


def run(open_ledger: Callable[[str | None], Ledger]) -> None:
    """Run the CLI; ``open_ledger`` (handed in by the composition root) opens the ledger a ``--db`` names."""
    common.use_ledger_opener(open_ledger)
    app()
