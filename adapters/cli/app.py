"""The ``contextledger`` command: typer app that registers every command module."""

from __future__ import annotations

import typer
from contextledger.adapters.cli import demo, import_cmd, render_cmd, sessions

__all__ = ["app", "main"]

app = typer.Typer(
    name="contextledger",
    help="The context layer of LLM agents, event-sourced.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

for module in (demo, sessions, import_cmd, render_cmd):
    module.register(app)


def main() -> None:
    """Run the CLI (the console-script entry point)."""
    app()
