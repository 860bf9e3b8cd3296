"""``contextledger render``: the context to send at a position of a session, under a policy and budget."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer
from contextledger.adapters.cli.common import (
    DbOption,
    JsonOption,
    cell,
    command,
    emit_json,
    out_console,
    run_guarded,
    use_cases,
)
from contextledger.adapters.cli.ids import session_ledger

if TYPE_CHECKING:
    from contextledger.projections.context import RenderedContext

__all__ = ["WireFormat", "print_context", "register", "render_document"]

WireFormat = Literal["openai", "anthropic"]
"""``--format`` choices: the request payload shape of ``--json``."""

_PREVIEW = 60

_CONTEXT_FIELDS = (
    "session_id",
    "position",
    "policy",
    "tokenizer",
    "tokens",
    "budget",
    "system_tokens",
    "tools_tokens",
    "stable_prefix",
    "summary_id",
)
"""The ``RenderedContext`` fields ``--json`` prints as they are; messages go out as the wire ``payload``."""


def render_document(context: RenderedContext, wire: WireFormat) -> dict[str, Any]:
    """Return ``render --json``: the context's fields (API names), decisions, exact dispositions, payload."""
    from contextledger.adapters.formats.anthropic import to_anthropic  # noqa: PLC0415 - loaded on use
    from contextledger.adapters.formats.openai import to_openai  # noqa: PLC0415 - loaded on use
    from contextledger.projections.dispositions import dispositions_of  # noqa: PLC0415 - loaded on use

    payload = to_openai(context) if wire == "openai" else to_anthropic(context)
    return {
        **{name: getattr(context, name) for name in _CONTEXT_FIELDS},
        "decisions": context.decisions,
        "dispositions": [
            {
                "first": r.first,
                "last": r.last,
                "disposition": r.disposition,
                "rule": r.rule,
                "summary_id": r.summary_id,
            }
            for r in dispositions_of(context)
        ],
        "format": wire,
        "payload": payload,
    }


def print_context(context: RenderedContext) -> None:
    """Print the rendered messages, the decisions by position and the token totals."""
    from rich.table import Table  # noqa: PLC0415 - rich loads only when a command prints

    console = out_console()
    table = Table("#", "role", "kind", "tokens", "positions", "content")
    for i, message in enumerate(context.messages):
        flat = " ".join(message.text.split())
        if message.tool_calls:
            flat = (flat + " " + ", ".join(f"{c.name}#{c.id}" for c in message.tool_calls)).strip()
        preview = flat if len(flat) <= _PREVIEW else flat[: _PREVIEW - 1] + "…"
        sources = message.sources
        where = (
            "" if not sources else (str(sources[0]) if len(sources) == 1 else f"{sources[0]}-{sources[-1]}")
        )
        marker = "│" if i < context.stable_prefix else ""
        row = (f"{i}{marker}", message.role, message.kind, message.tokens, where, preview)
        table.add_row(*map(cell, row))
    console.print(table)
    decisions = Table("positions", "action", "rule", "detail")
    for decision in context.decisions:
        span = str(decision.first) if decision.first == decision.last else f"{decision.first}-{decision.last}"
        decisions.add_row(*map(cell, (span, decision.action, decision.rule, decision.detail)))
    console.print(decisions)
    console.print(
        f"{context.tokens:,} of {context.budget:,} tokens ({context.tokenizer}), policy {context.policy}, "
        f"position {context.position}, {len(context.messages)} messages, "
        f"stable prefix {context.stable_prefix}"
    )


def register(app: typer.Typer) -> None:
    """Add ``render`` to ``app``."""

    @command(
        app,
        "render",
        example="contextledger render 0f3c9a... --policy default --budget 32000 --format anthropic --json",
    )
    def render_command(  # noqa: PLR0917 - typer declares each option as a parameter
        session_id: Annotated[str, typer.Argument(help="The session to render (an id or a unique prefix).")],
        at: Annotated[
            int | None, typer.Option("--at", help="Render as of this position (default: the last event).")
        ] = None,
        policy: Annotated[
            str | None,
            typer.Option(
                "--policy",
                help="A preset (default, blocks, threshold, nexus, clip-archive) or a .toml file "
                "(default: default; with --from-projection, the active version's).",
            ),
        ] = None,
        budget: Annotated[
            int | None, typer.Option("--budget", help="Prompt budget in tokens (overrides the policy's).")
        ] = None,
        wire: Annotated[
            WireFormat, typer.Option("--format", help="Payload shape of --json: openai or anthropic.")
        ] = "openai",
        tokenizer: Annotated[
            str | None,
            typer.Option(
                "--tokenizer",
                help="cl100k_base (default), o200k_base or heuristic; with --from-projection, the active "
                "version's.",
            ),
        ] = None,
        record: Annotated[
            bool, typer.Option("--record", help="Record this render as a model call (audit record).")
        ] = False,
        from_projection: Annotated[
            bool,
            typer.Option(
                "--from-projection",
                help="Serve from the active context projection under the config it was built with "
                "(events newer than its rows are folded from the log); a --policy, --budget or --tokenizer "
                "given that differs from it is refused.",
            ),
        ] = False,
        db: DbOption = None,
        json_output: JsonOption = False,
    ) -> None:
        """Print the context to send at a position of a session, within a token budget.

        --json prints the RenderedContext fields (tokens, budget, policy, decisions, ...)
        and, under "payload", the request exactly as it would be sent; with --record, "call_id".
        """

        def body() -> None:
            from contextledger.adapters.policy_files import resolve_policy  # noqa: PLC0415 - loaded on use

            call_id = None
            with session_ledger(db, session_id) as (ledger, session):
                active = None
                if from_projection:
                    from contextledger.application.rebuild.blue_green import active_config  # noqa: PLC0415

                    active = active_config(ledger.ports.projections)
                chosen = resolve_policy(policy or "default") if policy or active is None else active[0]
                used_budget = budget if budget is not None or active is None else active[1]
                renderer = use_cases().renderer(ledger, tokenizer or (active[2] if active else "cl100k_base"))
                if from_projection:
                    projector = renderer.projector(chosen, budget=used_budget)
                    renderer.require_active(projector, policy or chosen.name, used_budget)
                context = renderer.render(session, chosen, at=at, budget=used_budget)
                document = render_document(context, wire)
                if record:
                    recorder = use_cases().recorder(ledger)
                    call_id = recorder.record(
                        context, chosen, payload=document["payload"], wire_format=wire, driver="cli"
                    ).call_id
            if json_output:
                emit_json({**document, "call_id": call_id} if record else document)
            else:
                print_context(context)
                if call_id:
                    out_console().print(f"recorded as call {call_id}")

        run_guarded(body, json_output=json_output)
