"""The audit never says "summarized" for what no shown summary stands for (``no_room_uncovers``, ADR 0097)."""

from __future__ import annotations

import re

from contextledger.projections.fold import Projector
from contextledger.projections.presets import PRESETS
from hypothesis import given
from projection_helpers import count_all, policies, resolve, sessions
from test_properties import COMMON, WORDS

_SPAN = re.compile(r"log positions (\d+)-(\d+)")


@COMMON
@given(session=sessions(), policy=policies())
def test_a_summarized_decision_always_has_a_shown_summary_reaching_it(session, policy):
    """With the option on, every ``summarized`` range ends within the reach of a summary the call shows.

    Without it, a summary that stopped fitting the room (or gave way to one starting later) left the
    groups it had taken out recorded as ``summarized``: ``why`` and the report named a summary no call
    showed (the Claude Code fixture at 6,000 tokens: seven such positions beside ``2-240 summary:no-room``).
    """
    on = policy.summary.model_copy(update={"no_room_uncovers": True})
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
        assert preset.summary.no_room_uncovers
        assert "no_room_uncovers" in preset.fingerprint()
        before = preset.summary.model_copy(update={"no_room_uncovers": False})
        assert "no_room_uncovers" not in preset.model_copy(update={"summary": before}).fingerprint()
