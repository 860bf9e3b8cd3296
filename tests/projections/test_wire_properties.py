"""Rendered contexts of random sessions are well-paired, valid provider payloads in both formats."""

from __future__ import annotations

import os

import msgspec
from contextledger.adapters.formats.anthropic import to_anthropic
from contextledger.adapters.formats.openai import to_openai
from contextledger.domain.errors import PinnedOverBudgetError
from contextledger.projections.fold import Projector
from contextledger.testing import (
    check_anthropic_pairing,
    check_anthropic_structure,
    check_openai_pairing,
    check_openai_structure,
)
from hypothesis import HealthCheck, given, settings
from projection_helpers import Exercise, Words, count_all, policies, resolve, sessions

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
