"""``dispositions_of`` cut into segments gives exactly the runs of the per-position definition."""

from __future__ import annotations

from typing import get_args

from contextledger.application.audit.call_recorder import dispositions_of
from contextledger.domain.events import Disposition, DispositionRun
from contextledger.projections.context import Decision, DecisionAction, RenderedContext, RenderedMessage
from hypothesis import given, settings
from hypothesis import strategies as st

Fate = tuple[Disposition, str, str | None]
_ACTION: dict[str, Disposition] = {
    "kept": "verbatim",
    "pinned": "pinned",
    "truncated": "truncated",
    "stubbed": "stubbed",
    "summarized": "summarized",
    "dropped": "dropped",
}
_KIND: dict[str, Disposition] = {"message": "verbatim", "truncated": "truncated", "stub": "stubbed"}
_PRECEDENCE = {"summarized": 0, "dropped": 1, "stubbed": 2, "truncated": 3, "pinned": 4, "verbatim": 5}


def reference(context: RenderedContext, controls: frozenset[int]) -> tuple[DispositionRun, ...]:  # noqa: C901, PLR0912
    """The per-position definition (the implementation before the segments), one dict entry per event."""
    fate: dict[int, Fate] = {}
    for decision in context.decisions:
        disposition = _ACTION[decision.action]
        summary_id = context.summary_id if decision.action == "summarized" else None
        for position in range(decision.first, decision.last + 1):
            known = fate.get(position)
            if known is None or _PRECEDENCE[disposition] < _PRECEDENCE[known[0]]:
                fate[position] = (disposition, decision.rule, summary_id)
    pinned = {p for d in context.decisions if d.action == "pinned" for p in range(d.first, d.last + 1)}
    rules = {d.action: d.rule for d in context.decisions}
    shown: set[int] = set()
    for message in context.messages:
        kind = _KIND.get(message.kind)
        if kind is None:
            continue
        for position in message.sources:
            shown.add(position)
            if position in pinned and kind == "verbatim":
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
    for position, (disposition, _, _) in list(fate.items()):
        if position not in shown and disposition in {"verbatim", "pinned", "truncated", "stubbed"}:
            fate[position] = ("dropped", "not-rendered", None)
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


positions = st.integers(min_value=0, max_value=45)


@st.composite
def contexts(draw: st.DrawFn) -> tuple[RenderedContext, frozenset[int]]:
    """Random decisions (overlapping, out of range), messages with sources, controls."""
    end = draw(st.integers(min_value=1, max_value=40))
    decisions = []
    for _ in range(draw(st.integers(min_value=0, max_value=8))):
        first = draw(positions)
        decisions.append(
            Decision(
                first=first,
                last=first + draw(st.integers(min_value=0, max_value=20)),
                action=draw(st.sampled_from(get_args(DecisionAction))),
                rule=draw(st.sampled_from(["r1", "r2", "window", "retention"])),
            )
        )
    messages = [
        RenderedMessage(
            role=draw(st.sampled_from(["user", "assistant", "tool"])),
            text="t",
            tokens=1,
            kind=draw(st.sampled_from(["message", "truncated", "stub", "summary", "injection"])),
            sources=tuple(draw(st.lists(positions, max_size=3))),
        )
        for _ in range(draw(st.integers(min_value=0, max_value=12)))
    ]
    context = RenderedContext(
        session_id="s",
        position=end,
        policy="p",
        tokenizer="t",
        system=draw(st.sampled_from(["", "sys"])),
        system_tokens=0,
        tools=(),
        tools_tokens=0,
        messages=tuple(messages),
        stable_prefix=0,
        tokens=0,
        budget=100,
        decisions=tuple(decisions),
        summary_id=draw(st.sampled_from([None, "sum-1"])),
    )
    return context, frozenset(draw(st.lists(positions, max_size=4)))


@settings(max_examples=400, deadline=None)
@given(contexts())
def test_segments_give_the_runs_of_the_per_position_definition(
    case: tuple[RenderedContext, frozenset[int]],
) -> None:
    """For any decisions, shown messages and controls, the runs equal the per-position reference's."""
    context, controls = case
    assert dispositions_of(context, controls) == reference(context, controls)


def test_a_long_session_costs_segments_not_positions() -> None:
    """A render at position 10,000,000 with a few decisions yields its runs without a loop per event."""
    context = RenderedContext(
        session_id="s", position=10_000_000, policy="p", tokenizer="t", system="sys", system_tokens=0,
        tools=(), tools_tokens=0, stable_prefix=0, tokens=0, budget=100,
        messages=(RenderedMessage(role="user", text="t", tokens=1, sources=(9_999_999,)),),
        decisions=(Decision(first=2, last=9_999_998, action="dropped", rule="window"),),
    )  # fmt: skip
    assert dispositions_of(context) == (
        DispositionRun(1, 1, "pinned", "system", None),
        DispositionRun(2, 9_999_998, "dropped", "window", None),
        DispositionRun(9_999_999, 9_999_999, "verbatim", "verbatim", None),
        DispositionRun(10_000_000, 10_000_000, "dropped", "not-rendered", None),
    )
