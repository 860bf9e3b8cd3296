"""The ``contextledger`` console script: the CLI adapter, wired by the composition root."""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn

from contextledger.adapters.cli.app import run

if TYPE_CHECKING:
    from contextledger.application.kernel.ledger import Ledger

__all__ = ["main"]


def _open_ledger(url: str | None) -> Ledger:
    """Open the ledger through the composition root, loaded only when a command opens one."""
    from contextledger.bootstrap import open_ledger  # noqa: PLC0415 - keeps --help and --version fast

    return open_ledger(url)


def main() -> NoReturn:
    """Run the CLI with ledgers opened by ``open_ledger``."""
    run(_open_ledger)
