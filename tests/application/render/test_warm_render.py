"""A warm render with no new event reuses its context; any change renders afresh, equal to a new renderer."""

from __future__ import annotations

import contextledger
import msgspec
from contextledger.application.render.renderer import Renderer
from contextledger.projections.policy import Policy


def _session(ledger: contextledger.Ledger, turns: int) -> str:
    session = ledger.start_session(system_prompt="be brief")
    for i in range(turns):
        ledger.add_user_message(session, f"question {i} " + "word " * 50)
        ledger.add_assistant_message(session, f"answer {i} " + "word " * 50)
    return session


def _bytes(context: object) -> bytes:
    return msgspec.json.encode(context)


def test_a_warm_render_without_new_events_is_the_same_context():
    """Nothing new: the very same (frozen) context; a new event gives a new one, as a new renderer's."""
    with contextledger.open_ledger("memory://") as ledger:
        session = _session(ledger, 30)
        renderer = Renderer(ledger)
        first = renderer.render(session, "default", budget=2_000)
        assert renderer.render(session, "default", budget=2_000) is first
        ledger.add_user_message(session, "one more")
        after = renderer.render(session, "default", budget=2_000)
        assert after is not first
        assert after.position == first.position + 1
        assert _bytes(after) == _bytes(Renderer(ledger).render(session, "default", budget=2_000))


def test_the_reused_context_follows_position_budget_and_policy():
    """An earlier position, another budget or policy each render their own context, as new renderers do."""
    with contextledger.open_ledger("memory://") as ledger:
        session = _session(ledger, 30)
        renderer = Renderer(ledger)
        for _ in range(2):
            cases = (
                (None, 2_000, "default"),
                (20, 2_000, "default"),
                (None, 3_000, "default"),
                (None, 2_000, "nexus"),
            )
            for at, budget, policy in cases:
                warm = renderer.render(session, policy, at=at, budget=budget)
                fresh = Renderer(ledger).render(session, policy, at=at, budget=budget)
                assert _bytes(warm) == _bytes(fresh)


def test_equal_policy_objects_render_the_same_context():
    """Two distinct but equal policy objects render the same bytes, as a new renderer does."""
    with contextledger.open_ledger("memory://") as ledger:
        session = _session(ledger, 20)
        renderer = Renderer(ledger)
        one = Policy.parse({"base": "default"})
        other = Policy.parse({"base": "default"})
        assert one is not other
        expected = _bytes(Renderer(ledger).render(session, one, budget=2_000))
        assert _bytes(renderer.render(session, one, budget=2_000)) == expected
        assert _bytes(renderer.render(session, other, budget=2_000)) == expected
