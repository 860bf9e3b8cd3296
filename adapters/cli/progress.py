"""Progress of long commands (``simulate --all``, ``import`` of many files) on stderr, for people only.

A bar shows only when stderr is an interactive terminal and ``--json`` was not given: piped or
captured output, and every JSON document, stay exactly as they are without it. The bar is
transient (it leaves no line behind) and its texts are data, never markup.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from contextledger.adapters.cli.common import err_console

__all__ = ["Advance", "progress_shown", "step_bar"]

Advance = Callable[[int, int, str], None]
"""Told ``(done, total, what)``: how many steps are done of how many, and the one under way."""


def progress_shown(*, json_output: bool) -> bool:
    """Whether a command shows progress: an interactive terminal on stderr and no ``--json``.

    Interactive as rich decides it: a terminal that is not dumb, unless ``TTY_INTERACTIVE`` says.
    """
    return not json_output and err_console().is_interactive


def _nothing(_done: int, _total: int, _what: str) -> None:
    """The ``Advance`` of a bar not shown."""


@contextmanager
def step_bar(description: str, *, shown: bool) -> Iterator[Advance]:
    """A bar of ``description`` over counted steps; the ``Advance`` it yields does nothing when not shown."""
    if not shown:
        yield _nothing
        return
    from rich.progress import (  # noqa: PLC0415 - rich loads only when a bar shows
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[what]}", markup=False),
    )
    with Progress(*columns, console=err_console(), transient=True) as bar:
        task = bar.add_task(description, total=None, what="")

        shown_what = [""]

        def advance(done: int, total: int, what: str) -> None:
            # A new step's name is drawn at once (a fast step would otherwise never show it);
            # counts alone wait for the bar's own refresh.
            fresh = what != shown_what[0]
            shown_what[0] = what
            bar.update(task, completed=done, total=total, what=what, refresh=fresh)

        yield advance
