"""A summary that stops fitting gives way to a smaller one; what only it covered is named dropped."""

from __future__ import annotations

from contextledger.domain.content import InlineText
from contextledger.domain.events import AssistantMessageAdded, SessionStarted, ToolCall, UserMessageAdded
from contextledger.projections.counting import count_with
from contextledger.projections.fold import Projector
from contextledger.projections.presets import PRESETS
from projection_helpers import Words, _summary, resolve, words


def _fold(pending_calls: int):
    """Twenty-four replies, summaries of 3-10 (small) and 3-20 (large), then calls waiting (pinned)."""
    policy = PRESETS["default"]
    policy = policy.model_copy(update={"summary": policy.summary.model_copy(update={"on_arrival": True})})
    counter = Words()
    projector = Projector(policy, counter, budget=policy.budget.build().with_prompt_limit(4_000))
    events = [
        (1, SessionStarted(session_id="s", system_prompt="sys")),
        (2, UserMessageAdded(content=InlineText("first task"))),
    ]
    events += [(3 + i, AssistantMessageAdded(content=InlineText(words(100, f"a{i}_")))) for i in range(24)]
    seq = events[-1][0]
    events += [(seq, _summary(1, seq, 3, 10, 20)), (seq, _summary(2, seq, 3, 20, 600))]
    for i in range(pending_calls):
        call = ToolCall(id=f"c{i}", name="bash", arguments="{}")
        events.append(
            (seq + 1 + i, AssistantMessageAdded(content=InlineText(words(250, f"p{i}_")), tool_calls=(call,)))
        )
    state = projector.fold([count_with(counter, s, e) for s, e in events])
    return state, projector.render(state, resolve)


def test_what_only_the_summary_that_left_covered_is_named_dropped_not_summarized():
    """The large summary left for want of room; the small one reaches 10: 11-20 were "summarized" by none.

    Found by a review of the change: the decisions claimed positions 11-20 summarized while the only summary
    shown covers 3-10, and nothing named the large summary's leaving.
    """
    shown_large, _ = _fold(9)
    assert [(s.covers_from, s.covers_through) for s in shown_large.window.summaries] == [(3, 20)]
    state, context = _fold(10)
    assert [(s.covers_from, s.covers_through) for s in state.window.summaries] == [(3, 10)]
    summarized = {
        p for d in context.decisions if d.action == "summarized" for p in range(d.first, d.last + 1)
    }
    assert max(summarized) == 10
    dropped = [d for d in context.decisions if d.rule == "summary:no-room"]
    assert [(d.first, d.last) for d in dropped] == [(11, 20)]
    assert dropped[0].detail.startswith("10 messages")
