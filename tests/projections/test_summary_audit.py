"""The audit never says "summarized" for what no shown summary stands for (``exact_cover``, ADR 0097)."""

from __future__ import annotations

import re

from contextledger.domain.content import InlineText
from contextledger.domain.events import (
    AssistantMessageAdded,
    SessionStarted,
    SummaryRecorded,
    ToolCall,
    ToolResultRecorded,
    UserMessageAdded,
)
from contextledger.projections.fold import Projector
from contextledger.projections.policy import Policy
from contextledger.projections.presets import PRESETS
from hypothesis import given
from projection_helpers import count_all, policies, resolve, sessions, words
from test_properties import COMMON, WORDS

_SPAN = re.compile(r"log positions (\d+)-(\d+)")


@COMMON
@given(session=sessions(), policy=policies())
def test_a_summarized_decision_always_has_a_shown_summary_reaching_it(session, policy):
    """With the option on, every ``summarized`` range ends within the reach of a summary the call shows.

    In ``latest`` mode: clip-archive's middle batches, left out, still stand for their spans (``recall``).

    Without it, a summary that stopped fitting the room (or gave way to one starting later) left the
    groups it had taken out recorded as ``summarized``: ``why`` and the report named a summary no call
    showed (the Claude Code fixture at 6,000 tokens: seven such positions beside ``2-240 summary:no-room``).
    """
    on = policy.summary.model_copy(update={"exact_cover": True, "mode": "latest"})
    projector = Projector(policy.model_copy(update={"summary": on}), WORDS)
    state = projector.start()
    for counted in count_all(session, WORDS):
        state = projector.evolve(state, counted)
        if state.total > projector.budget.target:
            continue  # refused as pinned over budget: nothing rendered to audit
        context = projector.render(state, resolve)
        reach = [int(_SPAN.search(m.text).group(2)) for m in context.messages if m.kind == "summary"]
        for decision in context.decisions:
            if decision.action == "summarized":
                assert reach, f"{decision} with no summary shown"
                assert decision.last <= max(reach), f"{decision} past every shown summary's reach {reach}"


def test_the_presets_use_it_and_a_policy_without_it_keeps_its_fingerprint():
    """On in every preset; a policy recorded before it fingerprints (and so replays) as it did."""
    for preset in PRESETS.values():
        assert preset.summary.exact_cover
        assert "exact_cover" in preset.fingerprint()
        before = preset.summary.model_copy(update={"exact_cover": False})
        assert "exact_cover" not in preset.model_copy(update={"summary": before}).fingerprint()


@COMMON
@given(session=sessions(), policy=policies())
def test_nothing_within_a_shown_summarys_reach_is_also_shown_verbatim_unless_pinned(session, policy):
    """A group pinned when the summary was applied (the latest request) stayed after its pin lifted (S9).

    It was shown verbatim inside the span the summary stands for, twice in the cached prefix (the pylint
    fixture: 144 calls). It leaves at the first compaction point after its pin lifts (not before: the
    prefix changes only there), so the property is checked right after each compaction point.
    """
    on = policy.summary.model_copy(update={"exact_cover": True})
    projector = Projector(policy.model_copy(update={"summary": on}), WORDS)
    state = projector.start()
    for counted in count_all(session, WORDS):
        points = state.compactions
        state = projector.evolve(state, counted)
        if state.total > projector.budget.target or state.compactions == points:
            continue
        context = projector.render(state, resolve)
        reach = max(
            (int(_SPAN.search(m.text).group(2)) for m in context.messages if m.kind == "summary"), default=0
        )
        pinned = {p for d in context.decisions if d.action == "pinned" for p in range(d.first, d.last + 1)}
        for message in context.messages:  # a step group crossing the summary's end stays whole: not checked
            paired = message.role == "tool" or bool(message.tool_calls)
            if message.kind in {"message", "stub", "truncated"} and message.role != "system" and not paired:
                inside = [p for p in message.sources if p <= reach and p not in pinned]
                assert not inside, f"{message.kind} {message.sources} shown within reach {reach}"


def _lifted_request_session() -> list:
    """A summary of 2-4 applied while 4 is the latest request (pinned), then a new request and results."""
    session: list = [
        (1, SessionStarted(session_id="s", system_prompt="", tools=())),
        (2, UserMessageAdded(content=InlineText(words(5, "task")))),
        (3, AssistantMessageAdded(content=InlineText(words(5, "a3")))),
        (4, UserMessageAdded(content=InlineText(words(5, "q4")))),
        (4, _summary(2, 4)),
        (5, AssistantMessageAdded(content=InlineText(words(5, "a5")))),
        (6, UserMessageAdded(content=InlineText(words(5, "q6")))),
    ]
    for i, position in enumerate(range(7, 27, 2)):
        call = ToolCall(id=f"c{i}", name="bash", arguments="{}")
        session.append((position, AssistantMessageAdded(content=None, tool_calls=(call,))))
        result = ToolResultRecorded(
            call_id=call.id, tool_name="bash", content=InlineText(words(60, f"r{position}_"))
        )
        session.append((position + 1, result))
    return session


def _summary(first: int, through: int) -> SummaryRecorded:
    text = InlineText(words(5, "sum"))
    return SummaryRecorded(
        summary_id="sum",
        session_id="s",
        covers_from=first,
        covers_through=through,
        content=text,
        produced_at=through,
    )


def test_a_request_unpinned_inside_a_shown_summary_leaves_at_the_next_compaction_point():
    """Position 4 stayed verbatim beside the summary of 2-4 at every compaction point.

    It was pinned as the latest request when the summary was applied, and retention alone brought the
    context under its mark afterwards, so no group was dropped. Now it leaves, as summarized.
    """
    data = {
        "name": "t",
        "budget": {"total": 400, "output_reserve": 0, "injection_reserve": 0, "safety_margin": 0},
        "summary": {"mode": "latest", "on_arrival": True},
        "window": {"keep_first": 0},
        "card": {"enabled": False},
        "retention": {"enabled": True, "default": {"keep_last": 1}},
    }
    data["budget"] |= {"high_water": 0.9, "low_water": 0.85}
    shown = {}
    for exact in (False, True):
        projector = Projector(
            Policy.parse(data | {"summary": data["summary"] | {"exact_cover": exact}}), WORDS
        )
        state = projector.start()
        points = []
        for counted in count_all(_lifted_request_session(), WORDS):
            before = state.compactions
            state = projector.evolve(state, counted)
            if state.compactions != before and counted.position > 6:
                context = projector.render(state, resolve)
                points.append(any(4 in m.sources for m in context.messages if m.kind == "message"))
                assert context.summary_id == "sum"
        shown[exact] = points
    assert shown[False][0], "the session reaches the case: 4 verbatim beside the summary (as before)"
    assert not any(shown[True])
