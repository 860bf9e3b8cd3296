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
    ledger_opener,
    out_console,
    run_guarded,
)
from contextledger.domain.errors import ConfigError

if TYPE_CHECKING:
    from contextledger.adapters.store.projections import RecorderProjections
    from contextledger.application.kernel.ledger import Ledger
    from contextledger.application.rebuild.blue_green import Comparison, RebuildSpec

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


def _views_of(ledger: Ledger, *, json_output: bool) -> RecorderProjections:
    from contextledger.adapters.parallel_rebuild import projections_of  # noqa: PLC0415 - loaded on use

    try:
        return projections_of(ledger)
    except ConfigError as error:
        raise fail(str(error), json_output=json_output) from None


def _build(
    ledger: Ledger, store: RecorderProjections, spec: RebuildSpec, workers: int, *, quiet: bool
) -> tuple[str, dict[str, int]]:
    """Record the version's config and build it (in worker processes when it pays).

    Returns its name and what this run folded: events, batches, the checkpoint it started from
    (the lowest, when sharded) and the one it reached, and the number of workers.
    """
    from contextledger.adapters.parallel_rebuild import auto_workers, rebuild_in_shards  # noqa: PLC0415
    from contextledger.application.rebuild.blue_green import record_config  # noqa: PLC0415
    from contextledger.application.rebuild.lease_wait import (  # noqa: PLC0415
        LEASE_WAIT_SECONDS,
        lease_names,
        wait_for_leases,
    )
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn  # noqa: PLC0415

    runner = spec.runner(ledger, store, store)
    head = int(store.store.recorder.max_notification_id() or 0)
    record_config(store, runner.projection, runner.projector.policy, spec.budget, spec.tokenizer)
    count = workers or auto_workers(head)
    wait_for_leases(
        store,
        lease_names(runner.runner.checkpoints(), count),
        on_wait=lambda error: err_console().print(
            f"waiting for {error.projection}: held by {error.holder}, a runner still finishing "
            f"(up to {LEASE_WAIT_SECONDS:.0f} s)"
        ),
    )
    progress = Progress(
        TextColumn("rebuild"),
        BarColumn(),
        TextColumn("{task.completed:,.0f}/{task.total:,.0f} events"),
        TimeRemainingColumn(),
        console=err_console(),
        disable=quiet,
        auto_refresh=False,  # no refresh thread: worker processes are forked from this one
    )
    with progress:
        task = progress.add_task("rebuild", total=head)
        if count == 1:
            runner.on_batch = lambda done: progress.update(task, completed=done.tracking, refresh=True)
            stats = runner.run()
        else:
            url = ledger.ports.url
            stats = rebuild_in_shards(
                ledger_opener(),
                url,
                spec,
                count,
                on_progress=lambda n: progress.update(task, completed=n, refresh=True),
            )
        progress.update(task, completed=head, refresh=True)
    folded = {
        "events": stats.events,
        "batches": stats.batches,
        "from": stats.started_at,
        "to": stats.tracking,
        "workers": count,
        "failed": len(stats.failed),
    }
    return runner.projection, folded


def _follow(ledger: Ledger, store: RecorderProjections, spec: RebuildSpec) -> None:
    """Tail new notifications into the version (woken by LISTEN/NOTIFY on PostgreSQL) until Ctrl-C."""
    from contextledger.adapters.store.notification_waiters import notification_waiter  # noqa: PLC0415

    waiter = notification_waiter(store.store)
    err_console().print("following new events (Ctrl-C stops)")
    try:
        spec.runner(ledger, store, store).follow(stop=lambda: False, waiter=waiter, poll=5.0)
    except KeyboardInterrupt:
        pass
    finally:
        waiter.close()


def _checkpoint_rows(ledger: Ledger, *, json_output: bool) -> tuple[int, str | None, list[dict[str, object]]]:
    """The head notification id, the active context version, and each checkpoint with its lag."""
    from contextledger.application.render.context_versions import CONTEXT_VIEW  # noqa: PLC0415

    store = _views_of(ledger, json_output=json_output)
    head = int(store.store.recorder.max_notification_id() or 0)
    active = store.active(CONTEXT_VIEW)
    rows: list[dict[str, object]] = []
    for name, position in store.checkpoints().items():
        view, _, shard = name.partition("@")
        rows.append(
            {
                "checkpoint": name,
                "view": view,
                "shard": shard or None,
                "position": position,
                "behind": head - position,
                "active": view == active,
            }
        )
    return head, active, rows


def _register_projections(app: typer.Typer) -> None:
    @command(app, "projections", example="contextledger projections --db sqlite:///agent.db --json")
    def projections_command(db: DbOption = None, json_output: JsonOption = False) -> None:
        """List every checkpointed view (context versions, summaries, model_calls, search; shards too).

        Each with its position and how many notifications it is behind the ledger's head; the
        active context version is marked. --json prints {"head", "active", "checkpoints": [...]}.
        """

        def body() -> None:
            from rich.table import Table  # noqa: PLC0415 - rich loads only when a command prints

            with ledger_for(db) as ledger:
                head, active, rows = _checkpoint_rows(ledger, json_output=json_output)
            if json_output:
                emit_json({"head": head, "active": active, "checkpoints": rows})
                return
            table = Table("checkpoint", "position", "behind", "active", title=f"views at head {head:,}")
            for row in rows:
                table.add_row(
                    cell(str(row["checkpoint"])),
                    f"{row['position']:,}",
                    f"{row['behind']:,}",
                    "yes" if row["active"] else "",
                )
            out_console().print(table)

        run_guarded(body, json_output=json_output)


def register(app: typer.Typer) -> None:
    """Add ``rebuild`` and ``projections`` to ``app``."""
    _register_projections(app)

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
        workers: Annotated[
            int,
            typer.Option("--workers", help="Processes that rebuild a share of the sessions each (0: auto)."),
        ] = 0,
        views: Annotated[
            str,
            typer.Option("--views", help="Policy-free views kept in the same pass: summaries,calls,search."),
        ] = "summaries,calls,search",
        follow: Annotated[
            bool,
            typer.Option("--follow", help="After the rebuild, keep the version up to date until Ctrl-C."),
        ] = False,
        db: DbOption = None,
        json_output: JsonOption = False,
    ) -> None:
        """Build the context projection of a policy beside the live one, compare them, optionally switch.

        Progress (bar and ETA) goes to stderr; the live version keeps serving until --switch.
        --json prints {"version", "switched", "dropped", "live", "candidate", "differing", "folded"}.
        The same pass keeps the policy-free views (--views); large ledgers rebuild in --workers
        processes, each folding a share of the sessions (one checkpoint per share).
        """

        def body() -> None:
            from contextledger.adapters.policy_files import resolve_policy  # noqa: PLC0415 - loaded on use
            from contextledger.application.rebuild.blue_green import RebuildSpec, compare_versions  # noqa: PLC0415
            from contextledger.application.render.context_versions import CONTEXT_VIEW  # noqa: PLC0415

            chosen = resolve_policy(policy)
            kept = tuple(v for v in views.split(",") if v)
            with ledger_for(db) as ledger:
                views_store = _views_of(ledger, json_output=json_output)
                if drop is not None and drop == views_store.active(CONTEXT_VIEW) and not switch:
                    raise fail(f"{drop} is the active version: switch first", json_output=json_output)
                spec = RebuildSpec(chosen.model_dump_json(), budget, tokenizer, audit_views=kept)
                version, folded = _build(ledger, views_store, spec, workers, quiet=json_output)
                comparison = compare_versions(ledger, views_store, version)
                if switch:
                    views_store.activate(CONTEXT_VIEW, version)
                if drop is not None:
                    if drop == views_store.active(CONTEXT_VIEW):
                        raise fail(
                            f"{drop} is the active version: it is not dropped", json_output=json_output
                        )
                    views_store.drop(drop)
                if json_output:
                    emit_json(
                        {
                            "version": version,
                            "switched": switch,
                            "dropped": drop,
                            "live": comparison.live,
                            "candidate": comparison.candidate,
                            "differing": comparison.differing,
                            "folded": folded,
                        }
                    )
                else:
                    _print(comparison, version, switched=switch)
                    out_console().print(
                        f"folded {folded['events']:,} events in {folded['batches']:,} batches "
                        f"(checkpoint {folded['from']:,} -> {folded['to']:,}, {folded['workers']} worker(s))"
                    )
                if follow:
                    _follow(ledger, views_store, spec)

        run_guarded(body, json_output=json_output)
