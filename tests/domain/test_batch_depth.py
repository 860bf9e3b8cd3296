"""``any_too_deep`` answers for a batch what ``too_deep_by_walk`` answers for each of its values."""

from __future__ import annotations

from datetime import UTC, datetime

from contextledger.domain.content import BlobText, InlineText
from contextledger.domain.events import ToolResultRecorded, UserMessageAdded
from contextledger.domain.limits import MAX_STORED_DEPTH, any_too_deep, too_deep_by_walk
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.domain.test_depth_fast_path import _chain, _values


def _by_walk(values: list[object], limit: int) -> bool:
    """The definition: some value nests deeper than ``limit``."""
    return any(too_deep_by_walk(value, limit) for value in values)


@settings(max_examples=400, deadline=None)
@given(values=st.lists(_values(25), max_size=6), limit=st.integers(min_value=0, max_value=12))
def test_a_batch_is_too_deep_when_one_of_its_values_is(values: list[object], limit: int) -> None:
    """Any values (every container kind, foreign Structs, dict subclasses, other objects) and limits."""
    assert any_too_deep(values, limit) is _by_walk(values, limit)


_TEXTS = st.one_of(
    st.builds(InlineText, st.text(max_size=4)),
    st.builds(BlobText, sha256=st.just("a" * 64), chars=st.integers(0, 9), preview=st.text(max_size=3)),
)
_EVENTS = st.one_of(
    st.builds(
        UserMessageAdded,
        content=_TEXTS,
        at=st.sampled_from([None, datetime(2026, 1, 1, tzinfo=UTC)]),
        meta=st.dictionaries(st.text(max_size=2), _values(8), max_size=2),
    ),
    st.builds(ToolResultRecorded, call_id=st.text(max_size=3), tool_name=st.text(max_size=3), content=_TEXTS),
)


@settings(max_examples=300, deadline=None)
@given(events=st.lists(_EVENTS, max_size=8), limit=st.integers(min_value=0, max_value=6))
def test_batches_of_events_agree(events: list[object], limit: int) -> None:
    """Batches of events of mixed types and texts, as an append hands the mapper."""
    assert any_too_deep(events, limit) is _by_walk(events, limit)


@settings(max_examples=60, deadline=None)
@given(depths=st.lists(st.integers(min_value=1, max_value=200), max_size=3))
def test_deep_chains_in_a_batch_agree(depths: list[int]) -> None:
    """Lists nested past the store's limit are found in a batch as by the walk of each."""
    values = [_chain(depth) for depth in depths]
    assert any_too_deep(values, MAX_STORED_DEPTH) is _by_walk(values, MAX_STORED_DEPTH)


def test_a_value_containing_itself_is_too_deep() -> None:
    """A list holding itself nests without end: too deep, as the walk says."""
    looped: list[object] = []
    looped.append(looped)
    assert any_too_deep([1, looped], 5) is _by_walk([1, looped], 5) is True
