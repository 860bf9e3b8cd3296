"""The ``contextledger`` command: the app of the CLI contract with every command module registered."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

from contextledger.adapters.cli import (
    audit_cmd,
    common,
    demo,
    doctor_cmd,
    export_cmd,
    forget_cmd,
    fork_cmd,
    import_cmd,
    pin_cmd,
    rebuild_cmd,
    render_cmd,
    report_cmd,
    sessions,
    simulate_cmd,
    summaries_cmd,
)

if TYPE_CHECKING:
    from contextledger.application.kernel.ledger import Ledger

__all__ = ["app", "run"]

app = common.new_app()

for module in (
    demo,
    sessions,
    import_cmd,
    render_cmd,
    summaries_cmd,
    audit_cmd,
    simulate_cmd,
    fork_cmd,
    forget_cmd,
    pin_cmd,
    export_cmd,
    rebuild_cmd,
    report_cmd,
    doctor_cmd,
):
    module.register(app)


def run(
    open_ledger: Callable[[str | None], Ledger],
    argv: list[str] | None = None,
    *,
    use_cases: common.UseCases | None = None,
) -> NoReturn:
    """Run the CLI; ``open_ledger`` (handed in by the composition root) opens the ledger a ``--db`` names.

    ``use_cases`` (from the root too) builds the renderers and recorders commands use.
    """
    common.use_ledger_opener(open_ledger, use_cases)
    common.main(app, argv)
