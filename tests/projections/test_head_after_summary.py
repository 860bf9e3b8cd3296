"""A first turn arriving after a summary does not join the head (found by the prefix-stability property)."""

from __future__ import annotations

from contextledger.domain.content import InlineText
from contextledger.domain.events import (
    AssistantMessageAdded,
    ItemPinned,
    SessionStarted,
    SummaryRecorded,
    ToolCall,
    ToolResultRecorded,
    UserMessageAdded,
)
from contextledger.projections.fold import Projector
from contextledger.projections.policy import Policy

from tests.projections.test_properties import WORDS, count_all, resolve, stable_part


def test_a_late_first_turn_renders_after_the_summary_that_precedes_it():
    """The summary shown before the first user message stays first: the cached prefix survives the message."""
    session = [
        (1, SessionStarted(session_id="s", system_prompt="")),
        (2, AssistantMessageAdded(content=None, tool_calls=(ToolCall(id="call_1", name="read_file"),))),
        (3, ToolResultRecorded(call_id="call_1", tool_name="read_file", content=InlineText(""))),
        (4, ItemPinned(position=1)),
        (
            4,
            SummaryRecorded(
                summary_id="sum4",
                session_id="s",
                covers_from=1,
                covers_through=4,
                content=InlineText("s4_0"),
                produced_at=4,
            ),
        ),
        (5, UserMessageAdded(content=InlineText("u4_0"))),
    ]
    policy = Policy.model_validate(
        {
            "name": "late-first-turn",
            "budget": {
                "total": 120,
                "output_reserve": 0,
                "safety_margin": 0,
                "injection_reserve": 0,
                "high_water": 1.0,
                "low_water": 1.0,
                "head_cap": 1.0,
                "message_cap": 0.5,
            },
            "retention": {"enabled": False},
            "truncation": {"enabled": False},
            "summary": {
                "enabled": True,
                "mode": "latest",
                "clip_first": 0,
                "clip_last": 1,
                "on_arrival": True,
            },
            "window": {"keep_first": 1, "keep_first_unit": "turns"},
            "guarantee": {"protect_newest": False},
        }
    )
    projector = Projector(policy, WORDS)
    state = projector.start()
    renders = []
    for counted in count_all(session, WORDS):
        state = projector.evolve(state, counted)
        renders.append((projector.render(state, resolve), state.compactions))
    (before, compactions), (after, compactions_after) = renders[-2], renders[-1]
    assert compactions == compactions_after
    assert before.messages[-1].kind == "summary"
    kept = stable_part(before)
    assert after.messages[: len(kept)] == kept
    assert after.messages[-1].text == "u4_0"
