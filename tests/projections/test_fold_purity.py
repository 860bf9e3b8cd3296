"""``Projector.evolve`` and ``fold`` are pure: the state they are given is unchanged."""

from __future__ import annotations

import msgspec
from contextledger.projections.fold import Projector
from contextledger.projections.policy import Policy
from hypothesis import HealthCheck, given, settings
from projection_helpers import Builder, Words, count_all, policies, sessions

WORDS = Words()
_ENCODER = msgspec.msgpack.Encoder()


def _bytes(state: object) -> bytes:
    return _ENCODER.encode(state)


def test_evolve_leaves_its_input_unchanged_through_compactions():
    """Every evolve (compaction points, stubs and drops included) returns a new state, input intact."""
    builder = Builder()
    builder.user()
    for _ in range(40):
        builder.step(30, tool="read_file")
    policy = Policy.parse(
        {
            "budget": {"total": 1000, "output_reserve": 0, "high_water": 0.9, "low_water": 0.6},
            "retention": {"default": {"keep_steps": 2}},
            "truncation": {"max_lines": 3},
        }
    )
    projector = Projector(policy, WORDS)
    state = projector.start()
    for counted in builder.counted(WORDS):
        before = _bytes(state)
        after = projector.evolve(state, counted)
        assert after is not state
        assert _bytes(state) == before
        state = after
    assert state.compactions >= 2


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session=sessions(), policy=policies())
def test_fold_from_a_state_leaves_it_unchanged_and_equals_a_full_fold(session, policy):
    """Folding on from a state equals one full fold, and the state folded from is unchanged."""
    counted = count_all(session, WORDS)
    projector = Projector(policy, WORDS)
    half = projector.fold(counted[: len(counted) // 2])
    before = _bytes(half)
    resumed = projector.fold(counted[len(counted) // 2 :], half)
    assert _bytes(half) == before
    assert _bytes(resumed) == _bytes(projector.fold(counted))
