"""The ``contextledger`` console script: the CLI adapter, wired by the composition root."""

from __future__ import annotations

import atexit
import gc
import os
from typing import TYPE_CHECKING, NoReturn

from contextledger.adapters.cli.app import run
from contextledger.adapters.cli.common import UseCases

if TYPE_CHECKING:
    from contextledger.application.audit.call_recorder import CallRecorder
    from contextledger.application.kernel.ledger import Ledger
    from contextledger.application.render.renderer import Renderer

__all__ = ["PYDANTIC_PLUGINS_VARIABLE", "main"]

PYDANTIC_PLUGINS_VARIABLE = "PYDANTIC_DISABLE_PLUGINS"
"""Pydantic's switch for its plugins; the console script sets it to ``__all__`` unless it is set."""


def _open_ledger(url: str | None) -> Ledger:
    """Open the ledger through the composition root, loaded only when a command opens one."""
    from contextledger.bootstrap import open_ledger  # noqa: PLC0415 - keeps --help and --version fast

    return open_ledger(url)


def _renderer(ledger: Ledger, tokenizer: str) -> Renderer:
    """The root's renderer over ``ledger`` (loaded only when a command renders)."""
    from contextledger.bootstrap import renderer_for  # noqa: PLC0415 - keeps --help and --version fast

    return renderer_for(ledger, tokenizer)


def _recorder(ledger: Ledger) -> CallRecorder:
    """The root's call recorder over ``ledger`` (loaded only when a command reads or writes calls)."""
    from contextledger.bootstrap import recorder_for  # noqa: PLC0415 - keeps --help and --version fast

    return recorder_for(ledger)


def main() -> NoReturn:
    """Run the CLI with ledgers opened by ``open_ledger`` and use cases built by the root.

    At exit, the process's objects are frozen (``gc.freeze``, an exit handler) before the interpreter's
    last collections: they walked what a rebuild leaves (the tokenizer, caches, modules) for 0.2-0.3 s
    only to free memory the exit gives back anyway. Threads are still joined, exit handlers run and
    streams flushed as in any exit.

    Pydantic's plugins are not looked for (``PYDANTIC_DISABLE_PLUGINS``, unless the caller set it):
    finding them scans the entry points of every installed distribution, 0.05-0.07 s of every
    command's start, for validation hooks the commands never use. Setting the variable to anything
    (an empty value included) keeps pydantic's own behaviour.
    """
    os.environ.setdefault(PYDANTIC_PLUGINS_VARIABLE, "__all__")
    atexit.unregister(gc.freeze)  # once, however often main runs in one process (the CLI tests)
    atexit.register(gc.freeze)
    run(_open_ledger, use_cases=UseCases(renderer=_renderer, recorder=_recorder))
