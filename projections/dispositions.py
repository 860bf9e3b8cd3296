"""What a render did to each logged event (its disposition runs) and how its tokens split by tier."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from contextledger.domain.events import Disposition, DispositionRun, TokenTiers
from contextledger.projections.context import Decision, RenderedContext

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


def _decision_fate(decisions: Sequence[Decision], summary_id: str | None, position: int) -> Fate | None:
    """The fate the decisions give ``position``: the first of the highest precedence covering it.

    A summarized position is credited to the summary whose shown span covers it (clip-archive shows
    several; ``Decision.summary_id``), to none when no shown summary covers it, and to the context's
    ``summary_id`` only when no decision names a summary.
    """
    best: Fate | None = None
    named: str | None = None
    names = False
    for decision in decisions:
        shown_as = decision.summary_id
        names = names or shown_as is not None
        if decision.first <= position <= decision.last:
            named = named or shown_as
            disposition = _ACTION[decision.action]
            if best is None or _PRECEDENCE[disposition] < _PRECEDENCE[best[0]]:
                best = (disposition, decision.rule, None)
    if best is not None and best[0] == "summarized":
        return (best[0], best[1], named if names else summary_id)
    return best


_VERBATIM: Fate = ("verbatim", "verbatim", None)


def _from_messages(context: RenderedContext) -> dict[int, Fate]:
    """The fate of every shown event, labelled by its own message (shown positions are the keys).

    A message shown verbatim and not pinned is ``verbatim`` whatever a decision says of its range, so
    its decisions are not looked up: a request's record no longer walks every decision per message. A
    pinned message is ``pinned`` only when shown whole: a pinned first task that truncation cut is
    ``truncated`` (as ``pinned`` it was taken as whole, and ``why`` said a text of its cut middle was
    still in the context).
    """
    pinned = [(d.first, d.last) for d in context.decisions if d.action == "pinned"]
    rules: dict[str, str] = {d.action: d.rule for d in context.decisions}
    shown: dict[int, Fate] = {}
    for message in context.messages:
        kind = _KIND.get(message.kind)
        if kind is None:
            continue
        for position in message.sources:
            is_pinned = any(first <= position <= last for first, last in pinned)
            if kind == "verbatim" and not is_pinned:
                shown[position] = _VERBATIM
                continue
            labelled = shown.get(position) or _decision_fate(context.decisions, context.summary_id, position)
            if kind == "verbatim":  # so pinned (a pinned message truncated or stubbed is not whole)
                shown[position] = ("pinned", labelled[1] if labelled is not None else "pinned", None)
            else:
                rule = (
                    labelled[1]
                    if labelled is not None and labelled[0] == kind
                    else rules.get(kind, message.kind)
                )
                shown[position] = (kind, rule, None)
    return shown


_NOT_RENDERED: Fate = ("dropped", "not-rendered", None)
_SHOWN_ONLY = frozenset({"verbatim", "pinned", "truncated", "stubbed"})
"""Dispositions a range may give only to events a message shows; an event not shown was dropped."""


def dispositions_of(
    context: RenderedContext, controls: frozenset[int] = frozenset()
) -> tuple[DispositionRun, ...]:
    """Return the fate of every position 1..``context.position`` in runs, exact per event.

    Decisions give the rule of each range; each shown message then says exactly what happened to its
    own event (a range labelled ``truncated`` may hold untouched results), a summary stands for the
    positions of its span not shown, and ``controls`` (pins, unpins) are events with no text.

    The work follows the number of decisions, shown messages and controls, not the session's length:
    the positions are cut into segments at every decision boundary and every single-position fate,
    and each segment gets one fate.
    """
    end = context.position
    shown = _from_messages(context)
    single: dict[int, Fate] = {p: f for p, f in shown.items() if 1 <= p <= end}
    single[1] = ("pinned", "system", None) if context.system else ("control", "session-start", None)
    single.update({p: ("control", "control", None) for p in controls if 1 <= p <= end})
    cuts = {1, end + 1}
    for decision in context.decisions:
        cuts.update(c for c in (decision.first, decision.last + 1) if 1 <= c <= end)
    for position in single:
        cuts.update((position, position + 1))
    bounds = sorted(c for c in cuts if 1 <= c <= end + 1)
    runs: list[DispositionRun] = []
    for low, high in itertools.pairwise(bounds):
        fate = single.get(low) if high == low + 1 else None
        if fate is None:
            ranged = _decision_fate(context.decisions, context.summary_id, low)
            fate = _NOT_RENDERED if ranged is None or ranged[0] in _SHOWN_ONLY else ranged
        disposition, rule, summary_id = fate
        last = runs[-1] if runs else None
        if last is not None and (last.disposition, last.rule, last.summary_id) == fate:
            runs[-1] = DispositionRun(last.first, high - 1, disposition, rule, summary_id)
        else:
            runs.append(DispositionRun(low, high - 1, disposition, rule, summary_id))
    return tuple(runs)
