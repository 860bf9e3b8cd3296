"""``contextledger render``: the context to send at a position of a session, under a policy and budget."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import typer
from contextledger.adapters.cli.common import (
    DbOption,
    JsonOption,
    console,
    emit_json,
    fail,
    ledger_for,
    run_guarded,
)
from contextledger.adapters.formats.anthropic import to_anthropic
from contextledger.adapters.formats.openai import to_openai
from contextledger.adapters.policy_files import resolve_policy
from contextledger.application.renderer import Renderer
from contextledger.projections.context import RenderedContext
from rich.table import Table

__all__ = ["print_context", "register", "render_payload"]

WireFormat = Literal["openai", "anthropic"]

_PREVIEW = 60


def render_payload(context: RenderedContext, wire: WireFormat) -> dict[str, Any]:
    """Return the request payload exactly as it would be sent, plus ``tokens``, ``budget`` and ``policy``."""
    payload = to_openai(context) if wire == "openai" else to_anthropic(context)
    return {
        **payload,
        "tokens": context.tokens,
        "budget": context.budget,
        "policy": context.policy,
    }


def print_context(context: RenderedContext) -> None:
    """Print the rendered messages, the decisions by position and the token totals."""
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
        table.add_row(f"{i}{marker}", message.role, message.kind, str(message.tokens), where, preview)
    console.print(table)
    decisions = Table("positions", "action", "rule", "detail")
    for decision in context.decisions:
        span = str(decision.first) if decision.first == decision.last else f"{decision.first}-{decision.last}"
        decisions.add_row(span, decision.action, decision.rule, decision.detail)
    console.print(decisions)
    console.print(
        f"{context.tokens:,} of {context.budget:,} tokens ({context.tokenizer}), policy {context.policy}, "
        f"position {context.position}, {len(context.messages)} messages, "
        f"stable prefix {context.stable_prefix}"
    )


def register(app: typer.Typer) -> None:
    """Add ``render`` to ``app``."""

    @app.command("render")
    def render_command(  # noqa: PLR0917 - typer declares each option as a parameter
        session_id: Annotated[str, typer.Argument(help="The session to render.")],
        at: Annotated[
            int | None, typer.Option("--at", help="Render as of this position (default: the last event).")
        ] = None,
        policy: Annotated[
            str,
            typer.Option(
                "--policy", help="A preset (default, blocks, threshold, nexus, clip-archive) or a .toml file."
            ),
        ] = "default",
        budget: Annotated[
            int | None, typer.Option("--budget", help="Prompt budget in tokens (overrides the policy's).")
        ] = None,
        wire: Annotated[
            str, typer.Option("--format", help="Wire format of --json output: openai or anthropic.")
        ] = "openai",
        tokenizer: Annotated[
            str, typer.Option("--tokenizer", help="cl100k_base, o200k_base or heuristic.")
        ] = "cl100k_base",
        db: DbOption = None,
        json_output: JsonOption = False,
    ) -> None:
        """Print the context to send at a position of a session, within a token budget."""

        def body() -> None:
            if wire not in ("openai", "anthropic"):
                raise fail(f"--format must be openai or anthropic, not {wire!r}", code=2)
            chosen = resolve_policy(policy)
            with ledger_for(db) as ledger:
                renderer = Renderer(ledger, tokenizer=tokenizer)
                context = renderer.render(session_id, chosen, at=at, budget=budget)
                if json_output:
                    emit_json(render_payload(context, "openai" if wire == "openai" else "anthropic"))
                else:
                    print_context(context)

        run_guarded(body)
