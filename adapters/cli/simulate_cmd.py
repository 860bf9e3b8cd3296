"""``simulate``: replay recorded sessions under several policies and compare tokens, prompt cache and cost."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer
from contextledger.adapters.cli.common import (
    DbOption,
    JsonOption,
    cell,
    command,
    emit_json,
    fail,
    ledger_for,
    out_console,
    run_guarded,
)
from contextledger.adapters.cli.ids import id_column, short_session_ids
from contextledger.adapters.cli.progress import progress_shown, step_bar
from contextledger.adapters.whole_file import write_whole

if TYPE_CHECKING:
    from contextledger.application.rebuild.simulator import PolicyTotals, Simulation
    from rich.table import Table

__all__ = ["CSV_COLUMNS", "register", "write_csv"]

CSV_COLUMNS = (
    "row",
    "policy",
    "session_id",
    "position",
    "at",
    "gap_seconds",
    "input_tokens",
    "cached_tokens",
    "written_tokens",
    "cost",
    "prefix_break",
    "cache_expired",
    "over_budget",
    "summary_call",
    "summary_input_tokens",
    "evictions",
)
"""One ``call`` row per simulated call, then one ``total`` row per policy (same columns, sums)."""


def _rules(evictions: dict[str, int]) -> str:
    return ";".join(f"{rule}={count}" for rule, count in sorted(evictions.items()))


def write_csv(simulation: Simulation, path: Path) -> None:
    """Write ``simulation`` as CSV: the calls, then one total row per policy (``write_whole``)."""
    import csv  # noqa: PLC0415 - only when --csv is given
    import io  # noqa: PLC0415

    with io.StringIO(newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS)
        for c in simulation.calls:
            writer.writerow(
                (
                    "call",
                    c.policy,
                    c.session_id,
                    c.position,
                    c.at.isoformat() if c.at is not None else "",
                    "" if c.gap_seconds is None else round(c.gap_seconds, 3),
                    c.input_tokens,
                    c.cached_tokens,
                    c.written_tokens,
                    round(c.cost, 2),
                    int(c.prefix_break),
                    int(c.cache_expired),
                    int(c.over_budget),
                    int(c.summary_call),
                    c.summary_input_tokens,
                    _rules(c.evictions),
                )
            )
        for t in simulation.totals.values():
            writer.writerow(
                (
                    "total",
                    t.policy,
                    "",
                    "",
                    "",
                    "",
                    t.input_tokens,
                    t.cached_tokens,
                    t.written_tokens,
                    round(t.call_cost, 2),
                    t.prefix_breaks,
                    t.expired_calls,
                    t.over_budget_calls,
                    t.summary_calls,
                    t.summary_input_tokens,
                    _rules(t.evictions),
                )
            )
        write_whole(path, handle.getvalue())  # the whole file or none (an unwritable path is a StoreError)


def _expired(totals: PolicyTotals) -> str:
    """Calls after cache expiry; for calls with no recorded time it cannot be known, and says so."""
    known = f"{totals.expired_calls:,}"
    return known if not totals.untimed_calls else f"{known} (unknown for {totals.untimed_calls:,})"


def _untimed_note(simulation: Simulation) -> str | None:
    """A line saying which time-dependent figures cannot be known, or None when every call has a time."""
    untimed = max((t.untimed_calls for t in simulation.totals.values()), default=0)
    calls = max((t.calls for t in simulation.totals.values()), default=0)
    if not untimed:
        return None
    return (
        f"note: {untimed:,} of {calls:,} calls have no recorded time (their transcript did not say when): "
        "cache expiry before them and cache-aware compaction cannot be known; they count as no time elapsed"
    )


def _totals_table(simulation: Simulation) -> Table:
    """Return the totals with one column per policy (they stay readable on a narrow terminal)."""
    from rich.table import Table  # noqa: PLC0415 - rich loads only when a command prints

    ttl = f"{simulation.ttl_seconds:,.0f} s"
    budget = f"{simulation.budget:,}" if simulation.budget else "each policy's"
    totals = list(simulation.totals.values())
    table = Table(
        "",
        *(t.policy for t in totals),
        title=f"{simulation.provider} cache, TTL {ttl}, budget {budget}, {len(simulation.sessions)} "
        "session(s); costs in input-token equivalents",
    )
    rows: list[tuple[str, list[str]]] = [
        ("calls", [f"{t.calls:,}" for t in totals]),
        ("input tokens", [f"{t.input_tokens:,}" for t in totals]),
        ("cached (read) tokens", [f"{t.cached_tokens:,}" for t in totals]),
        ("cache hit ratio", [f"{t.cache_hit_ratio:.1%}" for t in totals]),
        ("written tokens", [f"{t.written_tokens:,}" for t in totals]),
        ("summary-call input", [f"{t.summary_input_tokens:,}" for t in totals]),
        ("effective cost", [f"{t.effective_cost:,.0f}" for t in totals]),
        ("cost with no cache", [f"{t.uncached_cost:,.0f}" for t in totals]),
        ("prefix breaks", [f"{t.prefix_breaks:,}" for t in totals]),
        ("calls after cache expiry", [_expired(t) for t in totals]),
        ("calls with no recorded time", [f"{t.untimed_calls:,}" for t in totals]),
        ("over-budget calls", [f"{t.over_budget_calls:,}" for t in totals]),
        ("summary calls", [f"{t.summary_calls:,}" for t in totals]),
    ]
    rows.extend(
        (f"evicted by {rule}", [f"{t.evictions.get(rule, 0):,}" for t in totals])
        for rule in sorted({rule for t in totals for rule in t.evictions})
    )
    for name, values in rows:
        table.add_row(cell(name), *(cell(v) for v in values))
    return table


def _print(simulation: Simulation, short: dict[str, str], *, per_call: bool) -> None:
    """The tables; ``short`` maps each session id to the unique prefix shown (``ids.short_session_ids``)."""
    from rich.table import Table  # noqa: PLC0415 - rich loads only when a command prints

    console = out_console()
    if per_call:
        session = id_column("session", short.values())
        calls = Table("policy", session, "pos", "gap s", "input", "cached", "written", "cost", "flags")
        for c in simulation.calls:
            flags = [
                name
                for name, on in (
                    ("break", c.prefix_break),
                    ("expired", c.cache_expired),
                    ("over", c.over_budget),
                    ("summary", c.summary_call),
                )
                if on
            ]
            gap = "?" if c.at is None else "" if c.gap_seconds is None else f"{c.gap_seconds:,.0f}"
            calls.add_row(
                cell(c.policy),
                cell(short[c.session_id]),
                cell(c.position),
                cell(gap),
                cell(f"{c.input_tokens:,}"),
                cell(f"{c.cached_tokens:,}"),
                cell(f"{c.written_tokens:,}"),
                cell(f"{c.cost:,.0f}"),
                cell(" ".join(flags)),
            )
        console.print(calls)
    console.print(_totals_table(simulation))
    note = _untimed_note(simulation)
    if note:
        console.print(cell(note))
    if simulation.facts:
        facts = Table(
            "fact",
            id_column("session", short.values()),
            *simulation.policies,
            title="facts (--fact): in the log, out of context",
        )
        rows: dict[tuple[str, str], dict[str, str]] = {}
        for f in simulation.facts:
            if f.entered_at is None:
                verdict = "not in log"
            elif f.left_calls:
                verdict = f"left at position {f.first_left_position} ({f.rule or '?'}), {f.left_calls} calls"
            else:
                verdict = "kept"
            rows.setdefault((f.fact, f.session_id), {})[f.policy] = verdict
        for (fact, session_id), verdicts in rows.items():
            facts.add_row(
                cell(fact), cell(short[session_id]), *(cell(verdicts.get(p, "")) for p in simulation.policies)
            )
        console.print(facts)
        for d in simulation.fact_differences:
            console.print(
                f"{d.fact!r} ({d.session_id}) leaves under {', '.join(d.left_under)} "
                f"but not under {', '.join(d.kept_under)}"
            )


def register(app: typer.Typer) -> None:
    """Add ``simulate`` to ``app``."""

    @command(
        app,
        "simulate",
        example="contextledger simulate --all --policy default --policy nexus --budget 32000\n"
        "contextledger simulate 0f3c9a... --policy default --policy cache-aware.toml --provider openai "
        "--fact 'ValueError' --json --csv calls.csv",
    )
    def simulate_command(  # noqa: PLR0917 - typer declares each option as a parameter
        session_ids: Annotated[
            list[str] | None,
            typer.Argument(help="Sessions to replay, ids or unique prefixes (or --all).", show_default=False),
        ] = None,
        all_sessions: Annotated[bool, typer.Option("--all", help="Replay every session.")] = False,
        policy: Annotated[
            list[str] | None,
            typer.Option(
                "--policy",
                help="A preset or a .toml file; repeat to compare (at least one).",
                show_default=False,
            ),
        ] = None,
        budget: Annotated[
            int | None, typer.Option("--budget", help="Prompt budget in tokens (overrides each policy's).")
        ] = None,
        provider: Annotated[
            Literal["anthropic", "openai"], typer.Option("--provider", help="Prompt cache model.")
        ] = "anthropic",
        ttl: Annotated[str, typer.Option("--ttl", help="Cache lifetime: 5m or 1h (or seconds).")] = "5m",
        fact: Annotated[
            list[str] | None,
            typer.Option(
                "--fact", help="A text to follow: where it leaves the context (repeat).", show_default=False
            ),
        ] = None,
        tokenizer: Annotated[
            str, typer.Option("--tokenizer", help="cl100k_base, o200k_base or heuristic.")
        ] = ("cl100k_base"),
        per_call: Annotated[bool, typer.Option("--calls", help="Also print one table row per call.")] = False,
        csv_path: Annotated[
            Path | None, typer.Option("--csv", help="Write the calls and totals as CSV to this file.")
        ] = None,
        db: DbOption = None,
        json_output: JsonOption = False,
    ) -> None:
        """Replay recorded sessions call by call under each policy, with no model call, and compare them.

        Summaries come from the extractive summarizer. Per call and per policy: input tokens, tokens
        read from the provider's prompt cache (TTL against the recorded timestamps), written, effective
        cost in input-token equivalents (Anthropic: reads 0.1x, writes 1.25x for 5m / 2x for 1h; OpenAI:
        reads 0.5x from 1,024 tokens in 128-token steps) plus summary-call input, prefix breaks, expired
        caches, over-budget calls, summary calls and evictions by rule.
        --json prints {"provider", "ttl_seconds", "budget", "policies", "sessions", "totals": {policy:
        {"calls", "input_tokens", "cached_tokens", "cache_hit_ratio", "effective_cost",
        "over_budget_calls", "summary_calls", ...}}, "calls": [...], "facts": [...],
        "fact_differences": [...]}.
        """

        def body() -> None:
            from contextledger.adapters.policy_files import resolve_policy  # noqa: PLC0415 - loaded on use
            from contextledger.adapters.summarizers.extractive import ExtractiveSummarizer  # noqa: PLC0415
            from contextledger.application.kernel.id_prefixes import resolve_session  # noqa: PLC0415
            from contextledger.application.rebuild.simulator import simulate  # noqa: PLC0415
            from contextledger.projections.provider_cache import provider_cache  # noqa: PLC0415

            if not policy:
                raise fail("give at least one --policy", json_output=json_output)
            if bool(session_ids) == all_sessions:
                raise fail("give session ids or --all (not both)", json_output=json_output)
            cache = provider_cache(provider, ttl)
            policies = [(spec, resolve_policy(spec)) for spec in policy]
            shown = progress_shown(json_output=json_output)
            with ledger_for(db) as ledger, step_bar("simulating", shown=shown) as advance:
                sessions = (
                    [i.session_id for i in ledger.sessions()]
                    if all_sessions
                    else list(dict.fromkeys(resolve_session(ledger, given) for given in session_ids or []))
                )  # a session named twice (or by two prefixes) is replayed once
                result = simulate(
                    ledger,
                    sessions,
                    policies,
                    cache=cache,
                    new_scratch=lambda: ledger_for("memory://"),
                    budget=budget,
                    make_summarizer=lambda counter: ExtractiveSummarizer(counter=counter),
                    tokenizer=tokenizer,
                    facts=fact or (),
                    on_replayed=lambda done, total: advance(done, total, "sessions x policies"),
                )
                short = short_session_ids(ledger, sessions)
            if csv_path is not None:
                write_csv(result, csv_path)
            if json_output:
                emit_json(result)
            else:
                _print(result, short, per_call=per_call)

        run_guarded(body, json_output=json_output)
