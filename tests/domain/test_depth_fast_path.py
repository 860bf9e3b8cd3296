"""``too_deep``'s bounded fast path answers exactly as the walk that defines it (``too_deep_by_walk``)."""

from __future__ import annotations

from datetime import UTC, date, datetime

import msgspec
from contextledger.domain.content import InlineText, MediaPart
from contextledger.domain.events import AssistantMessageAdded, ToolCall, UserMessageAdded
from contextledger.domain.limits import MAX_STORED_DEPTH, too_deep, too_deep_by_walk
from hypothesis import given, settings
from hypothesis import strategies as st


class _Box(msgspec.Struct):
    """A foreign Struct a caller might leave inside a free-form value."""

    inner: object = None


class _Omits(msgspec.Struct, omit_defaults=True):
    """A Struct whose defaults are not encoded: the depth still counts them, as the walk does."""

    hidden: tuple[object, ...] = (((),),)


class _MyDict(dict[str, object]):
    """A dict subclass: left to the walk."""


_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=5),
    st.binary(max_size=3),
    st.just(datetime(2026, 1, 1, tzinfo=UTC)),
    st.just(date(2026, 1, 1)),
    st.just(msgspec.UNSET),
    st.just(object()),
)


def _values(depth: int) -> st.SearchStrategy[object]:
    """Values nesting every container kind the walk knows (and some it leaves alone)."""
    return st.recursive(
        _LEAVES,
        lambda inner: st.one_of(
            st.dictionaries(st.text(max_size=3), inner, max_size=3),
            st.lists(inner, max_size=3),
            st.lists(inner, max_size=3).map(tuple),
            st.frozensets(st.integers(), max_size=2),
            st.builds(_Box, inner),
            st.just(_Omits()),
            st.dictionaries(st.text(max_size=2), inner, max_size=2).map(_MyDict),
            st.builds(lambda v: UserMessageAdded(content=InlineText("x"), meta={"v": v}), inner),
        ),
        max_leaves=depth,
    )


def _chain(depth: int) -> object:
    """A list ``depth`` levels deep (built without recursion)."""
    value: object = []
    for _ in range(depth - 1):
        value = [value]
    return value


@settings(max_examples=400, deadline=None)
@given(value=_values(40), limit=st.integers(min_value=0, max_value=12))
def test_fast_path_equals_the_walk(value: object, limit: int) -> None:
    """For any value and limit, ``too_deep`` answers what the defining walk answers."""
    assert too_deep(value, limit) is too_deep_by_walk(value, limit)


@settings(max_examples=60, deadline=None)
@given(depth=st.integers(min_value=1, max_value=200), limit=st.integers(min_value=0, max_value=140))
def test_chains_deeper_than_the_fast_path_agree(depth: int, limit: int) -> None:
    """Chains past the fast path's reach (it hands them to the walk) still answer like the walk."""
    value = _chain(depth)
    assert too_deep(value, limit) is too_deep_by_walk(value, limit) is (depth > limit)


def test_self_containing_value_is_answered_without_recursion_error() -> None:
    """A list that holds itself is too deep for any limit, on the fast path's hand-over too."""
    loop: list[object] = []
    loop.append(loop)
    assert too_deep(loop, MAX_STORED_DEPTH) is True


def test_drafted_events_are_measured_exactly() -> None:
    """The events an append drafts: user text with media, tool calls with meta, deep meta."""
    events: list[object] = [
        UserMessageAdded(content=InlineText("hi"), at=datetime(2026, 1, 1, tzinfo=UTC)),
        UserMessageAdded(
            content=InlineText("see"),
            media=(MediaPart(kind="image", source="url", data=InlineText("u"), sha256="s"),),
        ),
        AssistantMessageAdded(tool_calls=(ToolCall(id="c", name="n"),), meta={"a": {"b": [1]}}),
        UserMessageAdded(content=InlineText("deep"), meta={"v": _chain(MAX_STORED_DEPTH)}),
    ]
    for event in events:
        for limit in (0, 1, 2, 3, 4, 5, MAX_STORED_DEPTH):
            assert too_deep(event, limit) is too_deep_by_walk(event, limit)
    assert too_deep(events[-1], MAX_STORED_DEPTH) is True
