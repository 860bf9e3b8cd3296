"""Cache-aware compaction in the fold: compact at the first event after a gap longer than the cache TTL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec
import pytest
from contextledger.domain.errors import ConfigError
from contextledger.projections.fold import Projector
from contextledger.projections.policy import Policy
from projection_helpers import Builder, Words

WORDS = Words()
START = datetime(2026, 1, 1, tzinfo=UTC)


def _policy(expiry: str | None) -> Policy:
    budget: dict[str, object] = {"total": 1000, "output_reserve": 0, "high_water": 0.9, "low_water": 0.4}
    if expiry is not None:
        budget["compact_on_cache_expiry"] = expiry
    return Policy.parse({"budget": budget, "retention": {"enabled": False}})


def _timed(builder: Builder, gaps: dict[int, float]) -> list:
    """The builder's counted events stamped 10 s apart, with ``gaps`` (position -> seconds) inserted."""
    counted = builder.counted(WORDS)
    now = START
    stamped = []
    for item in counted:
        now += timedelta(seconds=gaps.get(item.position, 10))
        stamped.append(msgspec.structs.replace(item, event=msgspec.structs.replace(item.event, at=now)))
    return stamped


def _session() -> tuple[Builder, int]:
    builder = Builder()
    builder.user()
    for _ in range(10):
        builder.step(40)
    after_gap = builder.user()
    builder.step(5)
    return builder, after_gap


def _compactions_at(policy: Policy, events: list) -> dict[int, int]:
    projector = Projector(policy, WORDS)
    state = projector.start()
    seen: dict[int, int] = {}
    for counted in events:
        before = state.compactions
        state = projector.evolve(state, counted)
        seen[counted.position] = state.compactions - before
        assert state.total <= projector.budget.target
    return seen


def test_a_gap_longer_than_the_ttl_is_a_compaction_point_down_to_the_low_water_mark():
    """After a 10-minute gap the context (above low water) is compacted at once; plain policy waits."""
    builder, after_gap = _session()
    events = _timed(builder, {after_gap: 600})
    aware = Projector(_policy("5m"), WORDS)
    state = aware.fold(events[: [e.position for e in events].index(after_gap) + 1])
    plain = Projector(_policy(None), WORDS).fold(events[: [e.position for e in events].index(after_gap) + 1])
    assert plain.total > aware.budget.low_mark
    assert state.total <= aware.budget.low_mark
    assert _compactions_at(_policy("5m"), events)[after_gap] == 1
    assert _compactions_at(_policy(None), events)[after_gap] == 0


def test_a_gap_within_the_ttl_or_backwards_in_time_is_not_a_compaction_point():
    """A 4-minute gap under a 5-minute TTL, or an event stamped earlier than the last, does nothing."""
    builder, after_gap = _session()
    assert _compactions_at(_policy("5m"), _timed(builder, {after_gap: 240}))[after_gap] == 0
    backwards = _timed(builder, {after_gap: -3600})
    assert _compactions_at(_policy("5m"), backwards)[after_gap] == 0
    assert _compactions_at(_policy("1h"), _timed(builder, {after_gap: 600}))[after_gap] == 0


def test_without_the_option_the_state_carries_no_timestamp():
    """The option off leaves the fold's state exactly as before (no last_at)."""
    builder, after_gap = _session()
    state = Projector(_policy(None), WORDS).fold(_timed(builder, {after_gap: 600}))
    assert state.last_at is None
    aware = Projector(_policy("300"), WORDS).fold(_timed(builder, {after_gap: 600}))
    assert aware.last_at is not None


def test_incremental_fold_equals_full_fold_with_the_option():
    """Evolving event by event gives the same state as one fold (the timestamps live in the state)."""
    builder, after_gap = _session()
    events = _timed(builder, {after_gap: 600})
    projector = Projector(_policy("5m"), WORDS)
    state = projector.start()
    for counted in events:
        state = projector.evolve(state, counted)
    encode = msgspec.msgpack.encode
    assert encode(state) == encode(projector.fold(events))


@pytest.mark.parametrize("value", ["soon", "0m", "-5m"])
def test_a_bad_duration_is_a_config_error_naming_the_key(value):
    """The option is validated with the budget: the error names budget.compact_on_cache_expiry."""
    with pytest.raises(ConfigError, match=r"budget\.compact_on_cache_expiry"):
        _policy(value)
