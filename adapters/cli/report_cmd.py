"""``report``: write the inspector, one self-contained HTML file of a session's model calls."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer
from contextledger.adapters.cli.common import (
    DbOption,
    JsonOption,
    command,
    emit_json,
    err_console,
    ledger_for,
    out_console,
    run_guarded,
)
from contextledger.adapters.cli.ids import session_ledger
from contextledger.adapters.whole_file import write_whole

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``report`` to ``app``."""

    @command(
        app,
        "report",
        example="contextledger report 0f3c9a... -o report.html\n"
        "contextledger report 0f3c9a... --policy default --budget 32000 --compare nexus --provider openai",
    )
    def report_command(  # noqa: PLR0917 - typer declares each option as a parameter
        session_id: Annotated[str, typer.Argument(help="The session (an id or a unique prefix).")],
        output: Annotated[Path, typer.Option("-o", "--output", help="The HTML file to write.")] = Path(
            "report.html"
        ),
        policy: Annotated[
            str, typer.Option("--policy", help="Preset or .toml file for sessions with no recorded calls.")
        ] = "default",
        budget: Annotated[
            int | None, typer.Option("--budget", help="Prompt budget in tokens (computed calls).")
        ] = None,
        compare: Annotated[
            str | None,
            typer.Option("--compare", help="A second policy shown side by side.", show_default=False),
        ] = None,
        provider: Annotated[
            Literal["anthropic", "openai"], typer.Option("--provider", help="Prompt cache and price model.")
        ] = "anthropic",
        ttl: Annotated[str, typer.Option("--ttl", help="Cache lifetime: 5m or 1h (or seconds).")] = "5m",
        tokenizer: Annotated[
            str, typer.Option("--tokenizer", help="cl100k_base, o200k_base or heuristic (computed calls).")
        ] = "cl100k_base",
        db: DbOption = None,
        json_output: JsonOption = False,
    ) -> None:
        """Write one HTML file that shows what the model saw, call by call, and why.

        The page needs no network (CSS, script and data inline; a Content-Security-Policy forbids
        every request) and treats all logged text as text. Panels: timeline of each call's
        composition against the budget with compaction, summary, prefix-break and cache-expiry
        markers and cached vs uncached tokens and cost; the selected call's blocks (source
        positions, kind, rule and reducer, tokens, cache status; evicted items greyed); the diff
        with the previous call; a "why not?" search; the summaries; with --compare the same calls
        under a second policy. Recorded calls are shown when the session has them; otherwise the
        calls --policy would have made are computed (extractive summaries, no model call).
        --json prints {"path", "session_id", "source", "calls", "bytes"}.
        """

        def body() -> None:
            from datetime import UTC, datetime  # noqa: PLC0415 - loaded on use

            from contextledger.adapters.policy_files import resolve_policy  # noqa: PLC0415
            from contextledger.adapters.reports.page import render_page  # noqa: PLC0415
            from contextledger.adapters.reports.report_data import build_report  # noqa: PLC0415
            from contextledger.adapters.summarizers.extractive import ExtractiveSummarizer  # noqa: PLC0415
            from contextledger.projections.provider_cache import provider_cache  # noqa: PLC0415

            chosen = (policy, resolve_policy(policy))
            other = (compare, resolve_policy(compare)) if compare is not None else None
            with session_ledger(db, session_id) as (ledger, session):
                data = build_report(
                    ledger,
                    session,
                    policy=chosen,
                    cache=provider_cache(provider, ttl),
                    new_scratch=lambda: ledger_for("memory://"),
                    now=datetime.now(UTC),
                    budget=budget,
                    compare=other,
                    make_summarizer=lambda counter: ExtractiveSummarizer(counter=counter),
                    tokenizer=tokenizer,
                )
            if data.source == "recorded" and (budget is not None or policy != "default"):
                # recorded calls show as they were sent: --policy and --budget shape only the compared side
                err_console().print(
                    "note: the session's calls are recorded, shown as sent under their own policy and "
                    "budget; --policy is not used and --budget applies to --compare only"
                )
            page = render_page(data)
            write_whole(output, page)
            summary = {
                "path": str(output),
                "session_id": session,
                "source": data.source,
                "calls": len(data.calls),
                "bytes": len(page.encode()),
            }
            if json_output:
                emit_json(summary)
            else:
                out_console().print(
                    f"wrote {output} ({summary['bytes']:,} bytes, {len(data.calls)} {data.source} calls)",
                    markup=False,
                    highlight=False,
                )

        run_guarded(body, json_output=json_output)
