"""``rebuild``: build a context projection version beside the live one, compare, switch, drop."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from contextledger.adapters.cli.common import (
    DbOption,
    JsonOption,
    cell,
    command,
    emit_json,
    err_console,
    fail,
    ledger_for,
    out_console,
    run_guarded,
)

if TYPE_CHECKING:
    from contextledger.application.rebuild import Comparison

__all__ = ["register"]


def _print(comparison: Comparison, version: str, *, switched: bool) -> None:
    from rich.table import Table  # noqa: PLC0415 - rich loads only when a command prints

    live, new = comparison.live, comparison.candidate
    table = Table("", "live", "candidate", title=f"context projection {version}")
    table.add_row("version", cell(live.version if live else "(none)"), cell(new.version))
    table.add_row("policy", cell(live.policy if live else ""), cell(new.policy))
    table.add_row("sessions", f"{live.sessions:,}" if live else "", f"{new.sessions:,}")
    table.add_row("tokens (all renders)", f"{live.tokens:,}" if live else "", f"{new.tokens:,}")
    for rule in sorted(set(new.evictions) | set(live.evictions if live else {})):
        table.add_row(
            cell(f"evicted by {rule}"),
            f"{live.evictions.get(rule, 0):,}" if live else "",
            f"{new.evictions.get(rule, 0):,}",
        )
    table.add_row("sessions rendered differently", "", f"{len(comparison.differing):,}")
    console = out_console()
    console.print(table)
    console.print("switched: the candidate is active" if switched else "not switched (add --switch)")


def register(app: typer.Typer) -> None:
    """Add ``rebuild`` to ``app``."""

    @command(
        app,
        "rebuild",
        example="contextledger rebuild --policy new.toml --budget 32000\n"
        "contextledger rebuild --policy new.toml --budget 32000 --switch "
        "--drop context/0123456789abcdef/40000/cl100k_base",
    )
    def rebuild_command(  # noqa: PLR0917 - typer declares each option as a parameter
        policy: Annotated[str, typer.Option("--policy", help="A preset or a .toml file.")],
        budget: Annotated[int | None, typer.Option("--budget", help="Prompt budget in tokens.")] = None,
        tokenizer: Annotated[
            str, typer.Option("--tokenizer", help="cl100k_base, o200k_base or heuristic.")
        ] = "cl100k_base",
        switch: Annotated[bool, typer.Option("--switch", help="Make the new version active.")] = False,
        drop: Annotated[
            str | None, typer.Option("--drop", help="Drop this (inactive) version afterwards.")
        ] = None,
        db: DbOption = None,
        json_output: JsonOption = False,
    ) -> None:
        """Build the context projection of a policy beside the live one, compare them, optionally switch.

        Progress (bar and ETA) goes to stderr; the live version keeps serving until --switch.
        --json prints {"version", "switched", "dropped", "live", "candidate", "differing"}.
        """

        def body() -> None:
            from contextledger.adapters.policy_files import resolve_policy  # noqa: PLC0415 - loaded on use
            from contextledger.adapters.store.event_store import RecorderEventStore  # noqa: PLC0415
            from contextledger.adapters.store.projections import RecorderProjections  # noqa: PLC0415
            from contextledger.application.projection_runner import CONTEXT_VIEW  # noqa: PLC0415
            from contextledger.application.rebuild import build_version, compare_versions  # noqa: PLC0415
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn  # noqa: PLC0415

            chosen = resolve_policy(policy)
            with ledger_for(db) as ledger:
                store = ledger.ports.log
                if not isinstance(store, RecorderEventStore):
                    raise fail("this ledger's store keeps no projections", json_output=json_output)
                views = RecorderProjections(store)
                if drop is not None and drop == views.active(CONTEXT_VIEW) and not switch:
                    raise fail(f"{drop} is the active version: switch first", json_output=json_output)
                head = int(store.recorder.max_notification_id() or 0)
                progress = Progress(
                    TextColumn("rebuild"),
                    BarColumn(),
                    TextColumn("{task.completed:,.0f}/{task.total:,.0f} events"),
                    TimeRemainingColumn(),
                    console=err_console(),
                    disable=json_output,
                )
                with progress:
                    task = progress.add_task("rebuild", total=head)
                    runner = build_version(
                        ledger,
                        views,
                        views,
                        policy=chosen,
                        budget=budget,
                        tokenizer=tokenizer,
                        on_batch=lambda done: progress.update(task, completed=done.tracking),
                    )
                    progress.update(task, completed=head)
                comparison = compare_versions(ledger, views, runner.projection)
                if switch:
                    views.activate(CONTEXT_VIEW, runner.projection)
                if drop is not None:
                    if drop == views.active(CONTEXT_VIEW):
                        raise fail(
                            f"{drop} is the active version: it is not dropped", json_output=json_output
                        )
                    views.drop(drop)
            if json_output:
                emit_json(
                    {
                        "version": runner.projection,
                        "switched": switch,
                        "dropped": drop,
                        "live": comparison.live,
                        "candidate": comparison.candidate,
                        "differing": comparison.differing,
                    }
                )
            else:
                _print(comparison, runner.projection, switched=switch)

        run_guarded(body, json_output=json_output)
