"""``pin`` and ``unpin``: bring an evicted event back verbatim in the next render, or let it go again."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated

import typer
from contextledger.adapters.cli.common import (
    DbOption,
    JsonOption,
    command,
    emit_json,
    err_console,
    out_console,
    run_guarded,
)
from contextledger.adapters.cli.ids import session_ledger
from contextledger.domain.errors import ValidationError

if TYPE_CHECKING:
    from contextledger.application.kernel.ledger import Ledger
    from contextledger.application.render.pin_cost import PinCost

__all__ = ["parse_span", "register"]


_SPAN = re.compile(r"(\d+)(?:-(\d+))?", re.ASCII)
"""``N`` or ``FIRST-LAST`` in ASCII digits only (``int`` would also take ``+3``, `` 3``, ``3_0`` or ``٣``)."""


def parse_span(text: str) -> tuple[int, int]:
    """Return (first, last) of ``N`` or ``FIRST-LAST``; raise ``ValidationError`` otherwise."""
    matched = _SPAN.fullmatch(text)
    if matched is None:
        raise ValidationError(f"not a position or a span FIRST-LAST: {text!r}")
    span = (int(matched[1]), int(matched[2] or matched[1]))
    if not 1 <= span[0] <= span[1]:
        raise ValidationError(f"a span needs 1 <= FIRST <= LAST, got {text!r}")
    return span


def register(app: typer.Typer) -> None:
    """Add ``pin`` and ``unpin`` to ``app``."""
    _register_pin(app)
    _register_unpin(app)


def _pin(
    ledger: Ledger,
    session_id: str,
    position: str,
    *,
    reason: str,
    dry_run: bool,
    policy: str | None,
    budget: int | None,
    tokenizer: str | None,
) -> tuple[dict[str, object], PinCost]:
    """Measure the pin's cost under the active projection's config (or the one given); write it unless dry."""
    from contextledger.adapters.policy_files import resolve_policy  # noqa: PLC0415 - loaded on use
    from contextledger.application.rebuild.blue_green import active_config  # noqa: PLC0415
    from contextledger.application.render.pin_cost import pin_cost  # noqa: PLC0415
    from contextledger.application.render.renderer import Renderer  # noqa: PLC0415

    first, last = parse_span(position)
    span = last if "-" in position else None
    active = None if policy else active_config(ledger.ports.projections)
    chosen = active[0] if active else resolve_policy(policy or "default")
    renderer = Renderer(ledger, tokenizer=tokenizer or (active[2] if active else "cl100k_base"))
    used_budget = budget if budget is not None or active is None else active[1]
    cost = pin_cost(renderer, session_id, first, span, policy=chosen, budget=used_budget, reason=reason)
    if dry_run:
        return {"dry_run": True, "cost": cost}, cost
    document: dict[str, object] = {"warning": cost.describe(), "cost": cost} if cost.displaces else {}
    if span is not None:
        document["pin_positions"] = list(ledger.pin_span(session_id, first, span, reason))
    else:
        document["pin_position"] = ledger.pin(session_id, first, reason)
    return document, cost


def _register_pin(app: typer.Typer) -> None:
    @command(app, "pin", example='contextledger pin 0f3c9a... 1234 --reason "the schema is needed again"')
    def pin_command(  # noqa: PLR0917 - typer declares each option as a parameter
        session_id: Annotated[str, typer.Argument(help="The session (an id or a unique prefix).")],
        position: Annotated[
            str, typer.Argument(help="The position a stub names ('restore: seq N'), or a span FIRST-LAST.")
        ],
        reason: Annotated[str, typer.Option("--reason", help="Why (kept in the log).")] = "",
        dry_run: Annotated[
            bool,
            typer.Option("--dry-run", help="Say what the pin would bring back and displace; write nothing."),
        ] = False,
        policy: Annotated[
            str | None,
            typer.Option(
                "--policy", help="The policy its cost is measured under (default: the active one's)."
            ),
        ] = None,
        budget: Annotated[
            int | None, typer.Option("--budget", help="The prompt budget of that render.")
        ] = None,
        tokenizer: Annotated[
            str | None, typer.Option("--tokenizer", help="cl100k_base (default), o200k_base or heuristic.")
        ] = None,
        db: DbOption = None,
        json_output: JsonOption = False,
    ) -> None:
        """Pin POSITION: the next render shows it verbatim (stubbed, dropped or summarized) and keeps it.

        A span FIRST-LAST pins every message in it (undoing a compaction). New events; the log is never
        edited. A pin that displaces recent context (under the active projection's config, or --policy
        and --budget) says so on stderr; --dry-run only says what it would bring back and displace.
        --json prints {"session_id", "position", "pin_position"} (a span: "pin_positions"), plus "warning"
        and "cost" when it displaces; with --dry-run {"session_id", "position", "dry_run", "cost"}.
        """

        def body() -> None:
            with session_ledger(db, session_id) as (ledger, session):
                document, cost = _pin(
                    ledger,
                    session,
                    position,
                    reason=reason,
                    dry_run=dry_run,
                    policy=policy,
                    budget=budget,
                    tokenizer=tokenizer,
                )
            if json_output:
                shown: object = position if "-" in position else parse_span(position)[0]
                emit_json({"session_id": session, "position": shown, **document})
                return
            if dry_run:
                out_console().print(f"dry run, nothing written: {cost.describe()}")
                return
            if cost.displaces:
                err_console().print(f"warning: {cost.describe()}")
            out_console().print(f"pinned {position} of {session}")

        run_guarded(body, json_output=json_output)


def _register_unpin(app: typer.Typer) -> None:
    @command(app, "unpin", example="contextledger unpin 0f3c9a... 1234")
    def unpin_command(
        session_id: Annotated[str, typer.Argument(help="The session (an id or a unique prefix).")],
        position: Annotated[str, typer.Argument(help="The pinned position, or a span FIRST-LAST.")],
        db: DbOption = None,
        json_output: JsonOption = False,
    ) -> None:
        """Lift a pin of POSITION (or of every message of FIRST-LAST): what it brought back leaves again.

        --json prints {"session_id", "position", "unpin_position"} (a span: "unpin_positions").
        """

        def body() -> None:
            first, last = parse_span(position)
            with session_ledger(db, session_id) as (ledger, session):
                if "-" in position:
                    document: dict[str, object] = {
                        "unpin_positions": list(ledger.unpin_span(session, first, last))
                    }
                else:
                    document = {"unpin_position": ledger.unpin(session, first)}
            if json_output:
                shown: object = position if "-" in position else first
                emit_json({"session_id": session, "position": shown, **document})
                return
            out_console().print(f"unpinned {position} of {session}")

        run_guarded(body, json_output=json_output)
