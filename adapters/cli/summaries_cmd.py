"""``compact``, ``worker``, ``summaries`` and ``search``: the summary side of the engine in the CLI."""

from __future__ import annotations

import math
import time
from typing import Annotated

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
from contextledger.adapters.cli.ids import id_column, session_ledger
from contextledger.domain.errors import SummarizerError, SummarizerUnavailableError, ValidationError

__all__ = ["register"]

PolicyOption = Annotated[
    str,
    typer.Option(
        "--policy", help="A preset (default, blocks, threshold, nexus, clip-archive) or a .toml file."
    ),
]
BudgetOption = Annotated[
    int | None, typer.Option("--budget", help="Prompt budget in tokens (overrides the policy's).")
]
TokenizerOption = Annotated[str, typer.Option("--tokenizer", help="cl100k_base, o200k_base or heuristic.")]
SummarizerOption = Annotated[
    str,
    typer.Option(
        "--summarizer",
        help="extractive (offline, default), openai (OPENAI_API_KEY, OPENAI_BASE_URL) or anthropic "
        "(ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL).",
    ),
]


def register(app: typer.Typer) -> None:
    """Add ``compact``, ``worker``, ``summaries`` and ``search`` to ``app``."""
    _register_compact(app)
    _register_worker(app)
    _register_summaries(app)
    _register_search(app)


def _register_compact(app: typer.Typer) -> None:
    @command(
        app, "compact", example="contextledger compact 0f3c9a... --policy threshold --budget 32000 --json"
    )
    def compact_command(  # noqa: PLR0917 - typer declares each option as a parameter
        session_id: Annotated[str, typer.Argument(help="The session to compact (an id or a unique prefix).")],
        policy: PolicyOption = "default",
        budget: BudgetOption = None,
        tokenizer: TokenizerOption = "cl100k_base",
        summarizer: SummarizerOption = "extractive",
        model: Annotated[str | None, typer.Option("--model", help="Model of the summarizer.")] = None,
        db: DbOption = None,
        json_output: JsonOption = False,
    ) -> None:
        """Request a compaction of the session now (a manual trigger); a worker produces the summary.

        --json prints {"request": CompactionRequested | null}.
        """

        def body() -> None:
            from contextledger.adapters.policy_files import resolve_policy  # noqa: PLC0415 - loaded on use
            from contextledger.adapters.summarizers.factory import make_summarizer  # noqa: PLC0415
            from contextledger.application.summaries.compaction import Compactor  # noqa: PLC0415

            with session_ledger(db, session_id) as (ledger, session):
                renderer = use_cases().renderer(ledger, tokenizer)
                chosen = make_summarizer(summarizer, counter=renderer.counter, model=model)
                compactor = Compactor(
                    ledger, renderer, summarizer=chosen.name, summarizer_config=chosen.config_sha
                )
                request = compactor.plan(session, resolve_policy(policy), budget=budget, trigger="manual")
            if json_output:
                emit_json({"request": request})
                return
            console = out_console()
            if request is None:
                console.print("Nothing to compact (or a request is still open).")
            else:
                console.print(
                    f"Requested {request.request_id}: positions "
                    f"{request.covers_from}-{request.covers_through}, "
                    f"round {request.round}; run `contextledger worker` to produce it."
                )

        run_guarded(body, json_output=json_output)


def _register_worker(app: typer.Typer) -> None:
    @command(
        app,
        "worker",
        example="contextledger worker --once --db sqlite:///agent.db\ncontextledger worker --status --json",
    )
    def worker_command(  # noqa: PLR0917 - typer declares each option as a parameter
        once: Annotated[bool, typer.Option("--once", help="Process what is open now, then exit.")] = False,
        status: Annotated[
            bool, typer.Option("--status", help="List every request and its status; change nothing.")
        ] = False,
        summarizer: SummarizerOption = "extractive",
        model: Annotated[str | None, typer.Option("--model", help="Model of the summarizer.")] = None,
        tokenizer: TokenizerOption = "cl100k_base",
        worker_id: Annotated[str | None, typer.Option("--id", help="This worker's name in leases.")] = None,
        poll: Annotated[float, typer.Option("--poll", help="Seconds between passes when idle.")] = 2.0,
        db: DbOption = None,
        json_output: JsonOption = False,
    ) -> None:
        """Produce summaries for compaction requests (resumable; several workers may run).

        --status --json prints {"requests": [{"session_id", "request_id", "status", "attempts", ...}]};
        --once --json prints {"processed": N, "failed": F}; when every attempt failed it exits 6 with the
        last failure (the requests wait for their retry: --status).
        """

        def body() -> None:
            from contextledger.adapters.summarizers.factory import make_summarizer  # noqa: PLC0415
            from contextledger.adapters.system import worker_alive, worker_name  # noqa: PLC0415
            from contextledger.application.summaries.summary_worker import SummaryWorker  # noqa: PLC0415

            if not (math.isfinite(poll) and poll > 0):  # checked even with --once: a typo is a typo
                raise ValidationError(f"--poll takes a number of seconds above 0, not {poll}")

            with ledger_for(db, create=not status) as ledger:  # a worker may start before the first import
                renderer = use_cases().renderer(ledger, tokenizer)
                name = worker_id or worker_name()
                chosen = make_summarizer(summarizer, counter=renderer.counter, model=model)
                worker = SummaryWorker(ledger, renderer, chosen, worker_id=name, holder_alive=worker_alive)
                if status:
                    _print_status(worker, json_output=json_output)
                    return
                processed = worker.run_once()
                while not once:
                    time.sleep(0 if processed else poll)
                    processed = worker.run_once()
            if processed and len(worker.failed) == processed:  # every attempt failed: exit 6, not 0
                last = worker.failed[-1]
                unavailable = last.error_type == SummarizerUnavailableError.__name__
                error = SummarizerUnavailableError if unavailable else SummarizerError
                raise error(
                    f"every attempt failed ({processed}); the last: {last.error_type}: {last.message}"
                )
            if json_output:
                emit_json({"processed": processed, "failed": len(worker.failed)})
            else:
                failed = f" ({len(worker.failed)} failed; see --status)" if worker.failed else ""
                out_console().print(f"Processed {processed} requests{failed}.")

        run_guarded(body, json_output=json_output)


def _register_summaries(app: typer.Typer) -> None:
    @command(app, "summaries", example="contextledger summaries 0f3c9a... --json")
    def summaries_command(
        session_id: Annotated[str, typer.Argument(help="The session (an id or a unique prefix).")],
        db: DbOption = None,
        json_output: JsonOption = False,
        text: Annotated[
            bool,
            typer.Option("--text", help="Print each summary's text, span, status and fidelity report."),
        ] = False,
    ) -> None:
        """Show each compaction as a turn: parent, summarized span, first kept position, tokens, fidelity.

        --json prints {"session_id", "compactions": [CompactionTurn]}; with --text,
        {"session_id", "summaries": [SummaryText]}.
        """
        if text:
            run_guarded(
                lambda: _print_texts(session_id, db, json_output=json_output), json_output=json_output
            )
            return

        def body() -> None:
            from contextledger.application.summaries.lineage import compaction_turns  # noqa: PLC0415
            from rich.table import Column, Table  # noqa: PLC0415

            with session_ledger(db, session_id) as (ledger, session):
                turns = compaction_turns(ledger, session)
            if json_output:
                emit_json({"session_id": session, "compactions": turns})
                return
            table = Table(  # ids and figures fold when squeezed, never cut
                id_column("summary", (t.summary_id for t in turns)),
                "round",
                id_column("parent", (t.parent or "" for t in turns)),
                "summarized",
                "first kept",
                Column("tokens before→after", overflow="fold"),
                "fidelity (round)",
            )
            for t in turns:
                fidelity = f"{t.fidelity.overall:.0%}" if t.fidelity else ""
                sizes = f"{t.tokens_before or '?'}→{t.tokens_after or '?'}"
                table.add_row(
                    *map(
                        cell,
                        (
                            t.summary_id,
                            t.round,
                            t.parent or "",
                            f"{t.covers_from}-{t.summarized_through}",
                            t.first_kept,
                            sizes,
                            fidelity,
                        ),
                    )
                )
            out_console().print(table)

        run_guarded(body, json_output=json_output)


def _print_texts(session_id: str, db: str | None, *, json_output: bool) -> None:
    """``summaries --text``: each summary's text under a header with its span, status and fidelity."""
    from contextledger.application.summaries.lineage import summary_texts  # noqa: PLC0415

    with session_ledger(db, session_id) as (ledger, session):
        texts = summary_texts(ledger, session)
    if json_output:
        emit_json({"session_id": session, "summaries": texts})
        return
    console = out_console()
    if not texts:
        console.print(f"session {session} has no summary")
    for t in texts:
        name = t.summary_id or f"request {t.request_id}"
        status = t.status
        if t.status == "current":
            status = (
                f"current (available from position {t.produced_at}, applied at a compaction point after it)"
            )
        elif t.status == "superseded":
            status = f"superseded by {t.superseded_by}"
        elif t.status == "withheld":
            status = "low-fidelity: not applied (the contexts keep the verbatim history and the card)"
        if t.drafts > 1:
            status += f"; retried ({t.drafts} drafts)"
        console.print(f"== {name}: positions {t.covers_from}-{t.covers_through}, depth {t.depth}, {status}")
        if t.fidelity is not None:
            f = t.fidelity
            measured = t.measured_from if t.measured_from is not None else t.covers_from
            console.print(
                f"   fidelity of the events this round read (positions {measured}-{t.covers_through}; "
                f"earlier rounds' in their own): {f.overall:.0%} of {f.total} facts (paths {f.paths:.0%}, "
                f"commands {f.commands:.0%}, identifiers {f.identifiers:.0%}, numbers {f.numbers:.0%})"
                + (f"; missing: {', '.join(f.missing[:10])}" if f.missing else "")
            )
            console.print(
                f"   card check: instructions {f.constraints:.0%}, latest todo {f.todo:.0%}"
                + ("; low-fidelity, lost: " + "; ".join(f.lost[:10]) if f.lost else "")
            )
        console.print(t.text or "(no text yet)")
        console.print()


def _register_search(app: typer.Typer) -> None:
    @command(app, "search", example='contextledger search 0f3c9a... "ZFA04Y" --json')
    def search_command(  # noqa: PLR0917 - typer declares each option as a parameter
        session_id: Annotated[str, typer.Argument(help="The session (an id or a unique prefix).")],
        query: Annotated[str, typer.Argument(help="Text to find (case-insensitive).")],
        regex: Annotated[bool, typer.Option("--regex", help="QUERY is a regular expression.")] = False,
        limit: Annotated[int, typer.Option("--limit", help="At most this many hits.")] = 50,
        db: DbOption = None,
        json_output: JsonOption = False,
    ) -> None:
        """Find text anywhere in a session's log and summaries, whatever the context kept.

        --json prints {"session_id", "query", "hits": [SearchHit]}.
        """

        def body() -> None:
            from contextledger.application.search.log_search import search_session  # noqa: PLC0415
            from rich.table import Table  # noqa: PLC0415

            if limit < 1:
                raise ValidationError(f"--limit takes a number of hits of 1 or more, not {limit}")
            with session_ledger(db, session_id) as (ledger, session):
                hits = search_session(ledger, session, query, regex=regex, limit=limit)
            if json_output:
                emit_json({"session_id": session, "query": query, "hits": hits})
                return
            table = Table("position", "kind", "snippet")
            for hit in hits:
                where = hit.summary_id or hit.position
                table.add_row(cell(where), cell(hit.kind), cell(hit.snippet))
            out_console().print(table)

        run_guarded(body, json_output=json_output)


def _print_status(worker: object, *, json_output: bool) -> None:
    from contextledger.application.summaries.summary_worker import SummaryWorker  # noqa: PLC0415
    from rich.table import Table  # noqa: PLC0415

    if not isinstance(worker, SummaryWorker):
        raise TypeError(worker)
    now = worker.ledger.clock.now()
    rows = [
        {
            "session_id": session_id,
            "request_id": s.request.request_id,
            "status": s.status(now),
            "attempts": s.attempts,
            "covers_from": s.request.covers_from,
            "covers_through": s.request.covers_through,
            "trigger": s.request.trigger,
            "summary_id": s.summary_id,
            "last_error": s.last_error,
            "retry_after": s.retry_after,
        }
        for session_id, s in worker.requests()
    ]
    if json_output:
        emit_json({"requests": rows})
        return
    table = Table(id_column("session"), "request", "status", "attempts", "span", "last error")
    for row in rows:
        span = f"{row['covers_from']}-{row['covers_through']}"
        table.add_row(
            *map(
                cell,
                (
                    row["session_id"],
                    row["request_id"],
                    row["status"],
                    row["attempts"],
                    span,
                    row["last_error"] or "",
                ),
            )
        )
    out_console().print(table)
