"""``rebuild``: build a context projection version beside the live one, compare, switch, drop."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Annotated

import typer
from contextledger.adapters.cli.common import (
    DbOption,
    JsonOption,
    cell,
    command,
    emit_json,
    err_console,
    ledger_for,
    ledger_opener,
    out_console,
    run_guarded,
)
from contextledger.adapters.cli.progress import progress_shown
from contextledger.domain.errors import ConfigError, ValidationError

if TYPE_CHECKING:
    from contextledger.application.kernel.ledger import Ledger
    from contextledger.application.rebuild.blue_green import Comparison, RebuildSpec
    from contextledger.application.rebuild.rebuild import RebuildResult
    from rich.progress import Progress

__all__ = ["register"]


def _outcome(*, switched: bool, active: bool, dropped: str | None) -> list[str]:
    """What the rebuild did to the serving version and to ``--drop``, one line each."""
    if switched:
        lines = ["switched: the candidate is active"]
    elif active:
        lines = ["already active: this version serves (rebuilt in place)"]
    else:
        lines = ["not switched (add --switch)"]
    return lines + ([f"dropped {dropped}"] if dropped else [])


def _print(
    comparison: Comparison, version: str, *, switched: bool, active: bool = False, dropped: str | None = None
) -> None:
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
    if new.failed or (live and live.failed):
        table.add_row(
            "sessions that cannot render", f"{len(live.failed):,}" if live else "", f"{len(new.failed):,}"
        )
    table.add_row("sessions rendered differently", "", f"{len(comparison.differing):,}")
    console = out_console()
    console.print(table)
    if comparison.live_behind:
        console.print(
            cell(
                f"the live version is {comparison.live_behind:,} notification(s) behind this one: its "
                "renders of the sessions that grew since are older, and count as different"
            )
        )
    for session_id, reason in sorted(new.failed.items())[:_FAILED_LISTED]:
        console.print(cell(f"cannot render {session_id}: {reason}"))
    if len(new.failed) > _FAILED_LISTED:
        more = len(new.failed) - _FAILED_LISTED
        console.print(cell(f"... and {more:,} more session(s) that cannot render (--json lists them all)"))
    for line in _outcome(switched=switched, active=active, dropped=dropped):
        console.print(cell(line))


_FAILED_LISTED = 5
"""How many sessions that cannot render the table names (``--json`` has every one)."""


def _progress_bar() -> Progress:
    """The rebuild's progress bar on stderr (events folded, time left)."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn  # noqa: PLC0415

    return Progress(
        TextColumn("rebuild"),
        BarColumn(),
        TextColumn("{task.completed:,.0f}/{task.total:,.0f} events"),
        TimeRemainingColumn(),
        console=err_console(),
        auto_refresh=False,  # no refresh thread: worker processes are forked from this one
    )


def _rebuild(
    ledger: Ledger,
    spec: RebuildSpec,
    workers: int,
    *,
    switch: bool,
    drop: str | None,
    quiet: bool,
    compare: bool,
) -> RebuildResult:
    """Run the rebuild use case with a progress bar on stderr (in worker processes when it pays)."""
    from contextledger.adapters.parallel_rebuild import auto_workers, rebuild_in_shards  # noqa: PLC0415
    from contextledger.application.rebuild.lease_wait import LEASE_WAIT_SECONDS  # noqa: PLC0415
    from contextledger.application.rebuild.rebuild import rebuild, store_views  # noqa: PLC0415

    head = store_views(ledger)[1].head()
    # a terminal's stderr only: piped, or with --json (rich not even loaded), nothing
    progress = _progress_bar() if progress_shown(json_output=quiet) else None
    task = None if progress is None else progress.add_task("rebuild", total=head)

    def advance(completed: int) -> None:
        if progress is not None and task is not None:
            progress.update(task, completed=completed, refresh=True)

    with progress or contextlib.nullcontext():
        result = rebuild(
            ledger,
            spec,
            switch=switch,
            drop=drop,
            workers=workers or auto_workers(head),
            compare=compare,
            in_shards=lambda shard_spec, count: rebuild_in_shards(
                ledger_opener(), ledger.ports.url, shard_spec, count, on_progress=advance
            ),
            on_batch=lambda done: advance(done.tracking),
            on_wait=lambda error: err_console().print(
                f"waiting for {error.projection}: held by {error.holder}, a runner still finishing "
                f"(up to {LEASE_WAIT_SECONDS:.0f} s)"
            ),
        )
        advance(head)
    return result


def _rebuild_shard(
    ledger: Ledger, spec: RebuildSpec, text: str, *, switch: bool, drop: str | None, json_output: bool
) -> None:
    """Fold share ``i/n`` (1-based); print what it did and, when it completed the rebuild, the comparison."""
    from contextledger.application.rebuild.rebuild import store_views  # noqa: PLC0415 - loaded on use
    from contextledger.application.rebuild.shards import rebuild_shard  # noqa: PLC0415
    from contextledger.application.render.context_versions import CONTEXT_VIEW  # noqa: PLC0415
    from contextledger.application.views.view_runner import Shard  # noqa: PLC0415

    index, _, count = text.partition("/")
    if not (index.isascii() and index.isdigit() and count.isascii() and count.isdigit()):
        raise ValidationError(f"--shard takes i/n (e.g. 1/2), not {text!r}")
    if not 1 <= int(index) <= int(count):
        raise ValidationError(f"--shard i/n needs 1 <= i <= n, not {text!r}")
    done = rebuild_shard(ledger, spec, Shard(int(index) - 1, int(count)), switch=switch, drop=drop)
    comparison = done.comparison
    active = comparison is not None and store_views(ledger)[0].active(CONTEXT_VIEW) == done.version
    if json_output:
        compared: dict[str, object] = {}
        if comparison is not None:
            compared = {"live": comparison.live, "candidate": comparison.candidate}
            compared["differing"] = comparison.differing
            compared["live_behind"] = comparison.live_behind
            compared |= {"switched": switch, "active": active, "dropped": drop}
        emit_json(
            {
                "version": done.version,
                "shard": done.shard,
                "completed": comparison is not None,
                "pending": done.pending,
                "folded": {"events": done.stats.events, "batches": done.stats.batches},
                **compared,
            }
        )
        return
    out_console().print(f"shard {done.shard}: folded {done.stats.events:,} events of {done.version}")
    if comparison is None:
        out_console().print(f"waiting for shards {', '.join(done.pending)}: the last one to finish completes")
    else:
        _print(comparison, done.version, switched=switch and active, active=active, dropped=drop)


def _folded(result: RebuildResult) -> dict[str, int]:
    """What the run folded: events, batches, checkpoints from and to, workers, failed sessions.

    ``from`` is the checkpoint the run started from (the lowest, when sharded), ``to`` the one reached.
    """
    stats = result.stats
    return {
        "events": stats.events,
        "batches": stats.batches,
        "from": stats.started_at,
        "to": stats.tracking,
        "workers": result.workers,
        "failed": len(stats.failed),
    }


def _follow(ledger: Ledger, spec: RebuildSpec) -> None:
    """Tail new notifications into the version (woken by LISTEN/NOTIFY on PostgreSQL) until Ctrl-C."""
    from contextledger.application.rebuild.rebuild import store_views  # noqa: PLC0415 - loaded on use

    views, reader = store_views(ledger)
    if ledger.ports.waiter is None:
        raise ConfigError("this ledger's store cannot wake a live tail")
    waiter = ledger.ports.waiter()
    err_console().print("following new events (Ctrl-C stops)")
    try:
        spec.runner(ledger, reader, views).follow(stop=lambda: False, waiter=waiter, poll=5.0)
    except KeyboardInterrupt:
        pass
    finally:
        waiter.close()


def _checkpoint_rows(ledger: Ledger) -> tuple[int, str | None, list[dict[str, object]]]:
    """The head notification id, the active context version, and each checkpoint with its lag."""
    from contextledger.application.rebuild.rebuild import store_views  # noqa: PLC0415 - loaded on use
    from contextledger.application.render.context_versions import CONTEXT_VIEW  # noqa: PLC0415

    views, reader = store_views(ledger)
    head = reader.head()
    active = views.active(CONTEXT_VIEW)
    rows: list[dict[str, object]] = []
    for name, position in views.checkpoints().items():
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
            from rich.table import Column, Table  # noqa: PLC0415 - rich loads only when a command prints

            with ledger_for(db) as ledger:
                head, active, rows = _checkpoint_rows(ledger)
            if json_output:
                emit_json({"head": head, "active": active, "checkpoints": rows})
                return
            console = out_console()
            console.print(cell(f"active context version: {active or '(none)'}"))  # whole, whatever the width
            title = f"views at head {head:,}"
            table = Table(Column("checkpoint", overflow="fold"), "position", "behind", "active", title=title)
            for row in rows:
                table.add_row(
                    cell(str(row["checkpoint"])),
                    f"{row['position']:,}",
                    f"{row['behind']:,}",
                    "yes" if row["active"] else "",
                )
            console.print(table)

        run_guarded(body, json_output=json_output)


def register(app: typer.Typer) -> None:
    """Add ``rebuild`` and ``projections`` to ``app``."""
    _register_projections(app)

    @command(
        app,
        "rebuild",
        example="contextledger rebuild --policy new.toml --budget 32000\n"
        "contextledger rebuild --policy new.toml --budget 32000 --switch "
        "--drop context/default-40k/0123456789abcdef/cl100k_base/r5",
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
        no_compare: Annotated[
            bool,
            typer.Option("--no-compare", help="Skip the comparison with the live version (nothing printed)."),
        ] = False,
        follow: Annotated[
            bool,
            typer.Option("--follow", help="After the rebuild, keep the version up to date until Ctrl-C."),
        ] = False,
        shard: Annotated[
            str | None,
            typer.Option("--shard", help="i/n: fold share i of n (other processes or hosts run the rest)."),
        ] = None,
        db: DbOption = None,
        json_output: JsonOption = False,
    ) -> None:
        """Build the context projection of a policy beside the live one, compare them, optionally switch.

        Progress (bar and ETA) goes to stderr; the live version keeps serving until --switch.
        --json prints {"version", "switched", "active", "dropped", "live", "candidate", "differing",
        "live_behind", "folded"}: "active" says the version serves after the run (switched to, or
        rebuilt in place).
        --switch makes it active only if every session renders under it (else exit 1, nothing switched).
        The comparison is read from the render digests each build writes beside its rows; with
        --no-compare it is skipped ("live", "candidate" and "differing" are null) and a version built
        from empty writes no digests (a later comparison renders its sessions from their rows).
        The same pass keeps the policy-free views (--views); large ledgers rebuild in --workers
        processes, each folding a share of the sessions (one checkpoint per share). --shard i/n folds
        share i of n in this process only; the process that finishes last completes the rebuild
        (--json adds "shard", "completed" and "pending").
        """

        def body() -> None:
            from contextledger.adapters.parallel_rebuild import check_workers  # noqa: PLC0415
            from contextledger.adapters.policy_files import resolve_policy  # noqa: PLC0415 - loaded on use
            from contextledger.application.rebuild.blue_green import RebuildSpec  # noqa: PLC0415

            check_workers(workers)
            chosen = resolve_policy(policy)
            kept = tuple(v for v in views.split(",") if v)
            spec = RebuildSpec(chosen.model_dump_json(), budget, tokenizer, audit_views=kept)
            with ledger_for(db) as ledger:
                if shard is not None:
                    _rebuild_shard(ledger, spec, shard, switch=switch, drop=drop, json_output=json_output)
                    return
                result = _rebuild(
                    ledger, spec, workers, switch=switch, drop=drop, quiet=json_output, compare=not no_compare
                )
                comparison, folded = result.comparison, _folded(result)
                if json_output:
                    emit_json(
                        {
                            "version": result.version,
                            "switched": result.switched,
                            "active": result.active,
                            "dropped": result.dropped,
                            "live": comparison.live if comparison else None,
                            "candidate": comparison.candidate if comparison else None,
                            "differing": comparison.differing if comparison else None,
                            "live_behind": comparison.live_behind if comparison else None,
                            "folded": folded,
                        }
                    )
                elif comparison is not None:
                    _print(
                        comparison,
                        result.version,
                        switched=result.switched,
                        active=result.active,
                        dropped=result.dropped,
                    )
                else:
                    lines = _outcome(switched=result.switched, active=result.active, dropped=result.dropped)
                    out_console().print(cell(f"built {result.version}; " + "; ".join(lines)))
                    out_console().print(
                        f"folded {folded['events']:,} events in {folded['batches']:,} batches "
                        f"(checkpoint {folded['from']:,} -> {folded['to']:,}, {folded['workers']} worker(s))"
                    )
                if follow:
                    _follow(ledger, spec)

        run_guarded(body, json_output=json_output)
