"""The ``contextledger`` console script: the CLI adapter, wired by the composition root."""

from __future__ import annotations

from contextledger.adapters.cli.app import run
from contextledger.bootstrap import open_ledger

__all__ = ["main"]


def main() -> None:
    """Run the CLI with ledgers opened by ``open_ledger``."""
    run(open_ledger)
