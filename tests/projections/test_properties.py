"""Hypothesis properties of the render projection over random sessions and random policies."""

from __future__ import annotations

import os

import msgspec
import pytest
from contextledger.domain.errors import PinnedOverBudgetError
from contextledger.projections.counting import count_context
from contextledger.projections.fold import Projector
from contextledger.projections.groups import pin_reason
from contextledger.projections.state import RenderState
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from projection_helpers import Exercise, Words, count_all, orphans, policies, resolve, sessions, stable_part

LONG = os.environ.get("CONTEXTLEDGER_LONG") == "1"
EXAMPLES = 1500 if LONG else 150
COMMON = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
WORDS = Words()


def _render_or_pinned(projector: Projector, state: RenderState):
    """Render, or check that a PinnedOverBudgetError is justified and return None."""
    if state.total <= projector.budget.target:
        return projector.render(state, resolve)
    with pytest.raises(PinnedOverBudgetError) as raised:
        projector.render(state, resolve)
    assert raised.value.pinned_tokens > raised.value.budget_tokens == projector.budget.target
    unpinned = [g for g in state.window.groups if pin_reason(g, state) is None]
    newest = state.window.groups[-1:] if state.window.groups else []
    assert all(g in newest for g in unpinned), "an evictable group was left while over budget"
    return None


@COMMON
@given(session=sessions(), policy=policies())
def test_every_render_is_within_budget_and_paired(session, policy):
    """At every position the recounted context equals its tokens, fits the budget and has no orphan.

    The state's running total, the count the fold's compaction points compare with the water marks, is
    the rendered context's tokens too: a compaction never decides on a count the model does not see.
    """
    projector = Projector(policy, WORDS)
    state = projector.start()
    exercise = Exercise()
    for counted in count_all(session, WORDS):
        state = projector.evolve(state, counted)
        context = _render_or_pinned(projector, state)
        exercise.rendered(context, state.compactions)
        if context is None:
            continue
        assert count_context(context, WORDS) == context.tokens
        assert state.total == context.tokens  # the count compaction decides by is the render's
        assert context.tokens <= projector.budget.target <= context.budget
        assert orphans(context) == []
        assert context.position == state.position
    exercise.report()


@COMMON
@given(session=sessions(), policy=policies())
def test_equal_inputs_render_byte_identical(session, policy):
    """Two folds of the same events under the same policy render the same bytes."""
    counted = count_all(session, WORDS)
    first = Projector(policy, WORDS).fold(counted)
    second = Projector(policy, WORDS).fold(counted)
    assert msgspec.msgpack.encode(first) == msgspec.msgpack.encode(second)
    try:
        one = Projector(policy, WORDS).render(first, resolve)
    except PinnedOverBudgetError:
        return
    two = Projector(policy, WORDS).render(second, resolve)
    assert msgspec.json.encode(one) == msgspec.json.encode(two)


@COMMON
@given(session=sessions(), policy=policies(), data=st.data())
def test_incremental_catch_up_equals_full_replay(session, policy, data):
    """Folding in random chunks through snapshots (copies and msgpack round trips) equals one full fold."""
    counted = count_all(session, WORDS)
    projector = Projector(policy, WORDS)
    full = projector.fold(counted)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(counted)), max_size=6)))
    state = projector.start()
    done = 0
    for i, cut in enumerate([*cuts, len(counted)]):
        state = projector.fold(counted[done:cut], state)
        done = max(done, cut)
        if i % 2:
            state = state.copy()
        else:
            state = msgspec.msgpack.decode(msgspec.msgpack.encode(state), type=RenderState)
    assert state == full
    assert msgspec.msgpack.encode(state) == msgspec.msgpack.encode(full)


@COMMON
@given(session=sessions(), policy=policies())
def test_prefix_is_stable_between_compaction_points(session, policy):
    """Between compaction points each render extends the previous one (up to a pending placeholder)."""
    projector = Projector(policy, WORDS)
    state = projector.start()
    previous = None
    compactions = -1
    for counted in count_all(session, WORDS):
        state = projector.evolve(state, counted)
        try:
            context = projector.render(state, resolve)
        except PinnedOverBudgetError:
            previous = None
            continue
        if previous is not None and state.compactions == compactions:
            kept = stable_part(previous)
            assert context.messages[: len(kept)] == kept
        previous, compactions = context, state.compactions


@pytest.mark.parametrize("tokenizer", ["cl100k_base"])
@settings(max_examples=40 if not LONG else 300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session=sessions(max_ops=40), policy=policies())
def test_real_tokenizer_recount_matches(tokenizer, session, policy):
    """With the real cl100k tokenizer the recount of every render equals its tokens and fits the budget."""
    from contextledger.adapters.tokenizers import get_counter  # noqa: PLC0415 - adapter only in this test

    counter = get_counter(tokenizer)
    projector = Projector(policy, counter)
    state = projector.start()
    for counted in count_all(session, counter):
        state = projector.evolve(state, counted)
        context = _render_or_pinned(projector, state)
        if context is None:
            continue
        assert count_context(context, counter) == context.tokens <= context.budget
        assert orphans(context) == []
