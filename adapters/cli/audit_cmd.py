"""``calls``, ``replay-call`` and ``why``: the model-call audit records and the why-trace in the CLI."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from contextledger.adapters.cli.common import (
    DbOption,
    JsonOption,
    cell,
    command,
    emit_json,
    ledger_for,
    out_console,
    run_guarded,
    use_cases,
)
from contextledger.adapters.cli.ids import id_column, session_ledger, short_call_ids

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``calls``, ``replay-call`` and ``why`` to ``app``."""
    _register_calls(app)
    _register_replay(app)
    _register_why(app)


def _register_calls(app: typer.Typer) -> None:
    @command(app, "calls", example="contextledger calls 0f3c9a... --json")
    def calls_command(
        session_id: Annotated[str, typer.Argument(help="The session (an id or a unique prefix).")],
        db: DbOption = None,
        json_output: JsonOption = False,
    ) -> None:
        """List the session's recorded model calls: position, tokens by tier, summary applied, usage, status.

        A call the model never completed (``AgentContext.record_failure``, a broken stream) shows
        status ``failed`` and its error. --json prints {"session_id", "calls": [{"record":
        ModelCallRecorded, "usage", "failure", "status": "ok" | "failed", "error"}]}.
        """

        def body() -> None:
            from rich.table import Column, Table  # noqa: PLC0415 - rich loads only when a command prints

            with session_ledger(db, session_id) as (ledger, session):
                views = use_cases().recorder(ledger).calls(session)
            if json_output:
                listed = [
                    {
                        "record": v.record,
                        "usage": v.usage,
                        "failure": v.failure,
                        "status": "failed" if v.failure else "ok",
                        "error": v.failure.error if v.failure else None,
                    }
                    for v in views
                ]
                emit_json({"session_id": session, "calls": listed})
                return
            short = short_call_ids(v.record.call_id for v in views)
            table = Table(
                id_column("call", short.values()),
                Column("status", no_wrap=True, min_width=len("failed")),
                "position",
                "policy",
                "tokens",
                "system",
                "summary",
                "history",
                "results",
                "usage in/cached/out",
            )
            for view in views:
                r, u = view.record, view.usage
                used = f"{u.input_tokens}/{u.cached_tokens}/{u.output_tokens}" if u else ""
                tiers = r.tiers
                status = "failed" if view.failure else "ok"
                table.add_row(
                    *map(
                        cell,
                        (
                            short[r.call_id],
                            status,
                            r.position,
                            r.policy,
                            r.tokens,
                            tiers.system + tiers.tools,
                            tiers.summary,
                            tiers.history,
                            tiers.tool_results,
                            used,
                        ),
                    )
                )
            console = out_console()
            console.print(table)
            failed = [v for v in views if v.failure]
            console.print(
                f"{len(views)} calls, {len(failed)} failed (call ids: unique prefixes replay-call takes)"
            )
            for view in failed:
                assert view.failure is not None  # noqa: S101 - the list holds failed calls only
                console.print(cell(f"call {short[view.record.call_id]} failed: {view.failure.error}"))

        run_guarded(body, json_output=json_output)


def _register_replay(app: typer.Typer) -> None:
    @command(
        app,
        "replay-call",
        example="contextledger replay-call call-7 --session 0f3c9a... --json",
    )
    def replay_command(
        call_id: Annotated[str, typer.Argument(help="The recorded call (an id or a unique prefix).")],
        session_id: Annotated[
            str | None,
            typer.Option(
                "--session", help="Its session, an id or a unique prefix (default: search them all)."
            ),
        ] = None,
        db: DbOption = None,
        json_output: JsonOption = False,
    ) -> None:
        """Rebuild the exact payload of a recorded call from the log and artifacts, and verify its hash.

        The wire format is the one the call was recorded in. --json prints {"call_id", "session_id",
        "verified", "payload_sha", "format", "payload"}; a payload that differs from the record is an error
        (ReplayMismatchError, exit 1).
        """

        def body() -> None:
            from contextledger.adapters.providers.replay import replay_call  # noqa: PLC0415

            with ledger_for(db) as ledger:
                replayed = replay_call(ledger, call_id, session_id)
            record, payload, sha = replayed.record, replayed.payload, replayed.payload_sha
            session = record.session_id
            document = {
                "call_id": record.call_id,
                "session_id": session,
                "verified": True,
                "payload_sha": sha,
                "format": record.wire_format,
                "payload": payload,
            }
            if json_output:
                emit_json(document)
            else:
                out_console().print(
                    f"call {record.call_id} reproduced byte for byte ({record.wire_format}, "
                    f"{record.tokens:,} tokens, sha {sha[:16]})"
                )

        run_guarded(body, json_output=json_output)


def _print_fates(console: Any, answer: Any) -> None:
    """The fact's fate call by call: the first call and every change (equal fates in a row are one row)."""
    from rich.table import Table  # noqa: PLC0415 - rich loads only when a command prints

    if not answer.calls:
        return
    recorded = short_call_ids(f.call_id for f in answer.calls if f.call_id.startswith("call-"))
    short = {f.call_id: recorded.get(f.call_id, f.call_id) for f in answer.calls}  # "computed@270" whole
    policies = len({fate.policy for fate in answer.calls}) > 1
    columns = ["position", "shown", "fate", "rule", "summary", *(["policy"] if policies else [])]
    table = Table(
        id_column("call", short.values()),
        *columns,
        title=f"{len(answer.calls)} calls ({answer.calls_source})",
    )
    previous = None
    for fate in answer.calls:  # a change of how it shows is a row too: leaving the card is not a fate
        key = (fate.shown, fate.disposition, fate.rule, fate.summary_id, fate.policy)
        if key != previous:
            row = [short[fate.call_id], fate.position, fate.shown or "absent", fate.disposition, fate.rule]
            row += [fate.summary_id or "", *([fate.policy or ""] if policies else [])]
            table.add_row(*map(cell, row))
        previous = key
    console.print(table)


def _register_why(app: typer.Typer) -> None:
    @command(
        app, "why", example='contextledger why 0f3c9a... "ZFA04Y" --policy default --budget 16000 --json'
    )
    def why_command(  # noqa: PLR0917 - typer declares each option as a parameter
        session_id: Annotated[str, typer.Argument(help="The session (an id or a unique prefix).")],
        text: Annotated[str, typer.Argument(help="The fact to trace (case-insensitive text).")] = "",
        regex: Annotated[bool, typer.Option("--regex", help="TEXT is a regular expression.")] = False,
        position: Annotated[
            int | None, typer.Option("--position", help="Trace the event at this position.")
        ] = None,
        policy: Annotated[
            str | None, typer.Option("--policy", help="Compute the calls this policy would make.")
        ] = None,
        budget: Annotated[
            int | None, typer.Option("--budget", help="Prompt budget of the computed calls.")
        ] = None,
        tokenizer: Annotated[
            str, typer.Option("--tokenizer", help="cl100k_base, o200k_base or heuristic.")
        ] = "cl100k_base",
        db: DbOption = None,
        json_output: JsonOption = False,
    ) -> None:
        """Say where a fact entered the log, when it left the context, by which rule, and what keeps it.

        Uses the session's recorded model calls; with --policy (or when none are recorded) the calls that
        policy
        would have made, one before each assistant message. --json prints the WhyAnswer (verdict, entered_at,
        first_left_call, rule, reducer, summary_contains, smallest_change, calls).
        """

        def body() -> None:
            from contextledger.adapters.policy_files import resolve_policy  # noqa: PLC0415
            from contextledger.application.audit.forensics import why  # noqa: PLC0415

            with session_ledger(db, session_id) as (ledger, session):
                chosen = resolve_policy(policy) if policy else None
                answer = why(
                    ledger,
                    session,
                    text,
                    renderer=use_cases().renderer(ledger, tokenizer),
                    regex=regex,
                    position=position,
                    policy=chosen,
                    budget=budget,
                )
            if json_output:
                emit_json(answer)
                return
            console = out_console()
            console.print(cell(answer.verdict, "bold"))
            if answer.policy:
                console.print(cell(f"under policy {answer.policy} ({answer.calls_source} calls)"))
            if answer.caveat:
                console.print(cell(f"note: {answer.caveat}"))
            if answer.entered_at is not None:
                console.print(
                    cell(f"entered at position {answer.entered_at} ({answer.entered_kind}): {answer.snippet}")
                )
            if answer.smallest_change:
                console.print(cell(f"to keep it: {answer.smallest_change}"))
            _print_fates(console, answer)

        run_guarded(body, json_output=json_output)
