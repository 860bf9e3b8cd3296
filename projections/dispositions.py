"""What a render did to each logged event (its disposition runs) and how its tokens split by tier."""

from __future__ import annotations

from contextledger.domain.events import Disposition, DispositionRun, TokenTiers
from contextledger.projections.context import RenderedContext

__all__ = ["dispositions_of", "tiers_of"]

_ACTION: dict[str, Disposition] = {
    "kept": "verbatim",
    "pinned": "pinned",
    "truncated": "truncated",
    "stubbed": "stubbed",
    "summarized": "summarized",
    "dropped": "dropped",
}
_KIND: dict[str, Disposition] = {"message": "verbatim", "truncated": "truncated", "stub": "stubbed"}


def tiers_of(context: RenderedContext) -> TokenTiers:
    """Split the rendered tokens by tier; the tiers add up to ``context.tokens``."""
    summary = history = results = injected = 0
    for message in context.messages:
        if message.kind == "summary":
            summary += message.tokens
        elif message.kind == "injection":
            injected += message.tokens
        elif message.role == "tool":
            results += message.tokens
        else:
            history += message.tokens
    return TokenTiers(
        system=context.system_tokens,
        tools=context.tools_tokens,
        summary=summary,
        history=history,
        tool_results=results,
        injected=injected,
    )


Fate = tuple[Disposition, str, str | None]


_PRECEDENCE = {"summarized": 0, "dropped": 1, "stubbed": 2, "truncated": 3, "pinned": 4, "verbatim": 5}
"""For an event no message shows, the first of these that a decision gives it is its fate."""


def _from_decisions(context: RenderedContext) -> dict[int, Fate]:
    fate: dict[int, Fate] = {}
    for decision in context.decisions:
        disposition = _ACTION[decision.action]
        summary_id = context.summary_id if decision.action == "summarized" else None
        for position in range(decision.first, decision.last + 1):
            known = fate.get(position)
            if known is None or _PRECEDENCE[disposition] < _PRECEDENCE[known[0]]:
                fate[position] = (disposition, decision.rule, summary_id)
    return fate


def _pinned(context: RenderedContext) -> set[int]:
    return {p for d in context.decisions if d.action == "pinned" for p in range(d.first, d.last + 1)}


def _from_messages(context: RenderedContext, fate: dict[int, Fate]) -> set[int]:
    """Label every shown event by its own message; return the shown positions."""
    pinned = _pinned(context)
    rules: dict[str, str] = {d.action: d.rule for d in context.decisions}
    shown: set[int] = set()
    for message in context.messages:
        kind = _KIND.get(message.kind)
        if kind is None:
            continue
        for position in message.sources:
            shown.add(position)
            if position in pinned:
                fate[position] = ("pinned", fate.get(position, ("pinned", "pinned", None))[1], None)
            elif kind == "verbatim":
                fate[position] = ("verbatim", "verbatim", None)
            else:
                labelled = fate.get(position)
                rule = (
                    labelled[1]
                    if labelled is not None and labelled[0] == kind
                    else rules.get(kind, message.kind)
                )
                fate[position] = (kind, rule, None)
    return shown


def dispositions_of(
    context: RenderedContext, controls: frozenset[int] = frozenset()
) -> tuple[DispositionRun, ...]:
    """Return the fate of every position 1..``context.position`` in runs, exact per event.

    Decisions give the rule of each range; each shown message then says exactly what happened to its
    own event (a range labelled ``truncated`` may hold untouched results), a summary stands for the
    positions of its span not shown, and ``controls`` (pins, unpins) are events with no text.
    """
    fate = _from_decisions(context)
    shown = _from_messages(context, fate)
    for position, (disposition, _, _) in list(fate.items()):
        if position not in shown and disposition in {"verbatim", "pinned", "truncated", "stubbed"}:
            fate[position] = ("dropped", "not-rendered", None)  # labelled as kept by a range, yet not shown
    fate[1] = ("pinned", "system", None) if context.system else ("control", "session-start", None)
    for position in controls:
        fate[position] = ("control", "control", None)
    runs: list[DispositionRun] = []
    for position in range(1, context.position + 1):
        disposition, rule, summary_id = fate.get(position, ("dropped", "not-rendered", None))
        last = runs[-1] if runs else None
        if last is not None and (last.disposition, last.rule, last.summary_id) == (
            disposition,
            rule,
            summary_id,
        ):
            runs[-1] = DispositionRun(last.first, position, disposition, rule, summary_id)
        else:
            runs.append(DispositionRun(position, position, disposition, rule, summary_id))
    return tuple(runs)
