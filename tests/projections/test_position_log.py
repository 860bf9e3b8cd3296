"""PositionLog reads as the list of its appends, copies are independent, and it encodes deterministically."""

from __future__ import annotations

import bisect
import itertools

import msgspec
import pytest
from contextledger.projections.card_state import CardState
from contextledger.projections.position_log import CHUNK, PositionLog
from hypothesis import given, settings
from hypothesis import strategies as st


def _positions(gaps: list[int]) -> list[tuple[int, str]]:
    """Items in non-decreasing position order (a gap of 0 repeats a position), each named by its index."""
    return [(p, f"i{i}") for i, p in enumerate(itertools.accumulate(gaps))]


_GAPS = st.lists(st.integers(min_value=0, max_value=3), max_size=3 * CHUNK + 40)


@settings(max_examples=150, deadline=None)
@given(gaps=_GAPS, first=st.integers(min_value=-3, max_value=3 * CHUNK * 3), width=st.integers(-5, 900))
def test_a_log_reads_as_the_list_of_its_appends(gaps, first, width):
    """Length, iteration, reversal, indexes, spans, slices and membership all agree with a plain list."""
    items = _positions(gaps)
    log = PositionLog.of(items)
    assert len(log) == len(items)
    assert list(log) == items
    assert list(reversed(log)) == items[::-1]
    assert all(len(chunk) == CHUNK for chunk in log.chunks)
    assert len(log.tail) < CHUNK
    for index in {0, len(items) // 2, len(items) - 1, -1, -len(items)} if items else ():
        assert log[index] == items[index]
    last = first + width
    keys = [p for p, _ in items]
    lo, hi = bisect.bisect_left(keys, first), bisect.bisect_right(keys, last)
    assert log.span(first, last) == (lo, max(lo, hi))
    assert log.items(lo, hi) == items[lo:hi]
    assert log.items(hi, lo) == items[hi:lo]
    assert log.holds(first) == (first in keys)


def test_an_index_outside_the_log_is_an_index_error():
    """Indexes past either end raise ``IndexError``, as a list's do."""
    log = PositionLog.of([(1, "a"), (2, "b")])
    with pytest.raises(IndexError):
        log[2]
    with pytest.raises(IndexError):
        log[-3]


@settings(max_examples=60, deadline=None)
@given(
    before=st.integers(min_value=0, max_value=2 * CHUNK + 10),
    mine=st.integers(min_value=0, max_value=CHUNK + 10),
    theirs=st.integers(min_value=0, max_value=CHUNK + 10),
)
def test_a_copy_and_its_original_grow_apart(before, mine, theirs):
    """Appends to a copy never show in its original, nor the original's in the copy, at any chunk edge."""
    original = PositionLog.of([(i, "x") for i in range(before)])
    copy = original.copy()
    for i in range(mine):
        copy.append((before + i, "copy"))
    for i in range(theirs):
        original.append((before + i, "original"))
    assert list(copy) == [(i, "x") for i in range(before)] + [(before + i, "copy") for i in range(mine)]
    mine_too = [(before + i, "original") for i in range(theirs)]
    assert list(original) == [(i, "x") for i in range(before)] + mine_too


def test_a_copy_shares_the_full_chunks_and_not_the_tail():
    """A copy takes the chunk tuples themselves (no item is copied) and a tail of its own."""
    log = PositionLog.of([(i, "r") for i in range(5 * CHUNK + 7)])
    copy = log.copy()
    assert all(a is b for a, b in zip(copy.chunks, log.chunks, strict=True))
    assert copy.chunks is not log.chunks
    assert copy.tail is not log.tail
    assert copy == log


@settings(max_examples=60, deadline=None)
@given(gaps=_GAPS)
def test_equal_appends_encode_to_equal_bytes_and_decode_back(gaps):
    """A card state with the same appends encodes the same, and decodes to an equal state."""
    items = [(p, name, p % 2 == 0) for p, name in _positions(gaps)]
    one, other = CardState(), CardState()
    for item in items:
        one.users.append(item)
    other.users = PositionLog.of(items).copy()
    data = msgspec.msgpack.encode(one)
    assert data == msgspec.msgpack.encode(other)
    back = msgspec.msgpack.decode(data, type=CardState)
    assert back == one
    assert list(back.users) == items


def test_a_log_of_another_shape_is_refused_made_or_decoded():
    """A chunk of another size or a full tail would be read at wrong indexes: refused, never read."""
    with pytest.raises(ValueError, match="chunks of 256"):
        PositionLog([((1, "a"),)], [])
    with pytest.raises(ValueError, match="chunks of 256"):
        PositionLog([], [(i, "a") for i in range(CHUNK)])
    oversized = msgspec.msgpack.encode(([], [(i, "a") for i in range(CHUNK + 44)]))
    with pytest.raises(msgspec.ValidationError):
        msgspec.msgpack.decode(oversized, type=PositionLog[tuple[int, str]])
