"""Rendered contexts of random sessions are well-paired, valid provider payloads in both formats."""

from __future__ import annotations

import os

import msgspec
import pytest
from contextledger.adapters.formats.anthropic import to_anthropic
from contextledger.adapters.formats.openai import to_openai
from contextledger.domain.errors import PinnedOverBudgetError
from contextledger.projections.fold import Projector
from contextledger.projections.policy import Policy
from contextledger.testing import (
    check_anthropic_pairing,
    check_anthropic_structure,
    check_openai_pairing,
    check_openai_structure,
)
from hypothesis import HealthCheck, given, settings
from projection_helpers import Builder, Exercise, Words, count_all, policies, resolve, sessions

EXAMPLES = 1000 if os.environ.get("CONTEXTLEDGER_LONG") == "1" else 100
WORDS = Words()


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session=sessions(), policy=policies())
def test_no_orphaned_call_or_result_in_either_wire_format(session, policy):
    """At every position both payloads pair every call with its result and keep the providers' rules."""
    projector = Projector(policy, WORDS)
    state = projector.start()
    exercise = Exercise()
    for counted in count_all(session, WORDS):
        state = projector.evolve(state, counted)
        try:
            context = projector.render(state, resolve)
        except PinnedOverBudgetError:
            exercise.rendered(None, state.compactions)
            continue
        exercise.rendered(context, state.compactions)
        openai = to_openai(context)
        anthropic = to_anthropic(context)
        assert check_openai_pairing(openai) == []
        assert check_openai_structure(openai) == []
        assert check_anthropic_pairing(anthropic) == []
        assert check_anthropic_structure(anthropic) == []
    exercise.report()


@settings(max_examples=EXAMPLES // 2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session=sessions(), policy=policies())
def test_equal_inputs_give_byte_identical_payloads(session, policy):
    """Two independent folds of the same log give byte-identical OpenAI and Anthropic JSON."""
    counted = count_all(session, WORDS)
    try:
        first = Projector(policy, WORDS).render(Projector(policy, WORDS).fold(counted), resolve)
    except PinnedOverBudgetError:
        return
    second = Projector(policy, WORDS).render(Projector(policy, WORDS).fold(counted), resolve)
    assert msgspec.json.encode(to_openai(first)) == msgspec.json.encode(to_openai(second))
    assert msgspec.json.encode(to_anthropic(first)) == msgspec.json.encode(to_anthropic(second))


@pytest.mark.parametrize(
    ("unit", "keeps"),
    [
        ("messages", range(1, 19)),
        ("steps", range(1, 10)),
        ("turns", range(1, 3)),
        ("tokens", range(20, 480, 20)),
    ],
)
def test_every_keep_recent_value_keeps_tool_pairs_whole_on_a_mixed_transcript(unit, keeps):
    """Three tool steps, then a text answer, three turns over, at every keep value that cuts: never mid-pair.

    A peer's sliding window split by position (``keepRecent=4`` landed between a call and its result) and
    its own test used a text-only transcript. Here the window's own rule cuts at each keep value, and at
    every position both wire payloads pair every call with its result.
    """
    builder = Builder()
    for _ in range(3):
        builder.user()
        for _ in range(3):
            builder.step(20)
        builder.step(text=8)  # a text-only answer: no call
    counted = count_all([(p, e) for p, e in builder.events], WORDS)
    for keep in keeps:
        window = {"keep_first": 0, "keep_recent": keep, "keep_recent_unit": unit}
        policy = Policy.parse(
            {
                "name": "keep",
                "budget": {"total": 600, "output_reserve": 0, "high_water": 0.9, "low_water": 0.5},
                "retention": {"enabled": False},
                "truncation": {"enabled": False},
                "card": {"enabled": False},
                "window": window,
            }
        )
        projector = Projector(policy, WORDS)
        state = projector.start()
        cut = 0
        for event in counted:
            state = projector.evolve(state, event)
            context = projector.render(state, resolve)
            cut += any(d.rule == f"window:{unit}" for d in context.decisions)
            assert check_openai_pairing(to_openai(context)) == [], (unit, keep, state.position)
            assert check_anthropic_pairing(to_anthropic(context)) == [], (unit, keep, state.position)
        assert cut > 0, (unit, keep)  # the window's own rule left something out: its cut was exercised
