"""Offline cache metrics: common prefixes, breaks, H and C under both price models, units of a context."""

from __future__ import annotations

import msgspec
import pytest
from contextledger.projections.cache_metrics import (
    ANTHROPIC_LIKE,
    OPENAI_LIKE,
    CacheTotals,
    CallCache,
    Unit,
    cache_calls,
    common_prefix,
    measure,
    totals,
    units_of,
)
from hypothesis import given
from hypothesis import strategies as st


def u(name, tokens):
    """A unit keyed by its name."""
    return Unit(name.encode(), tokens)


HEAD = u("head", 1000)
A = [HEAD, u("m1", 100)]
B = [*A, u("m2", 50)]
C = [HEAD, u("m1-stubbed", 100), u("m2", 50)]


def test_calls_of_a_small_session_by_hand():
    """Extension shares everything; an edit in the middle shares only the head and is a break."""
    assert cache_calls([A, B, C, C]) == [
        CallCache(input_tokens=1100, common_tokens=0, prefix_break=False),
        CallCache(input_tokens=1150, common_tokens=1100, prefix_break=False),
        CallCache(input_tokens=1150, common_tokens=1000, prefix_break=True),
        CallCache(input_tokens=1150, common_tokens=1150, prefix_break=False),
    ]


def test_anthropic_like_totals_by_hand():
    """Cached from 1,024 tokens: 1100 + 0 (1000 < 1024) + 1150; C = 0.1 cached + 1.25 uncached."""
    result = measure([A, B, C, C], ANTHROPIC_LIKE)

    assert (result.calls, result.input_tokens, result.cached_tokens, result.prefix_breaks) == (
        4,
        4550,
        2250,
        1,
    )
    assert result.hit_ratio == pytest.approx(2250 / 4550)
    assert result.cost == pytest.approx(0.1 * 2250 + 1.25 * 2300)  # 3,100


def test_openai_like_totals_by_hand():
    """Cached in 128-token steps: 1100 -> 1024, 1000 -> 0, 1150 -> 1024; C = 0.5 cached + uncached."""
    result = measure([A, B, C, C], OPENAI_LIKE)

    assert (result.cached_tokens, result.prefix_breaks) == (2048, 1)
    assert result.hit_ratio == pytest.approx(2048 / 4550)
    assert result.cost == pytest.approx(0.5 * 2048 + 2502)  # 3,526


@pytest.mark.parametrize(
    ("common", "anthropic", "openai"),
    [(0, 0, 0), (1023, 0, 0), (1024, 1024, 1024), (1151, 1151, 1024), (1152, 1152, 1152), (5000, 5000, 4992)],
)
def test_cached_thresholds_and_steps(common, anthropic, openai):
    """Nothing is cached below 1,024 tokens; OpenAI rounds down to 128-token steps."""
    assert ANTHROPIC_LIKE.cached(common) == anthropic
    assert OPENAI_LIKE.cached(common) == openai


def test_a_shorter_prompt_is_a_break_even_when_it_is_a_prefix():
    """Dropping the tail (previous not a prefix of this one) is a break; the shared head still counts."""
    tokens, is_prefix = common_prefix(B, A)

    assert (tokens, is_prefix) == (1100, False)
    assert cache_calls([B, A])[1].prefix_break


def test_common_prefix_is_message_granular():
    """A unit that differs ends the common prefix even if later units match again."""
    assert common_prefix([HEAD, u("x", 5), u("y", 7)], [HEAD, u("z", 5), u("y", 7)]) == (1000, False)
    assert common_prefix([], [HEAD]) == (0, True)


def test_totals_add_across_sessions_of_one_model():
    """Totals of two sessions add field by field; totals of different models refuse to add."""
    one = totals(cache_calls([A, B]), ANTHROPIC_LIKE)
    two = totals(cache_calls([C, C]), ANTHROPIC_LIKE)
    both = one + two

    assert (both.calls, both.input_tokens, both.cached_tokens, both.prefix_breaks) == (4, 4550, 2250, 0)
    with pytest.raises(ValueError, match="cannot add openai"):
        _ = one + totals([], OPENAI_LIKE)


def test_no_calls_give_zero_ratio():
    """An empty session has H = 0 and C = 0 rather than a division error."""
    empty = CacheTotals(model=ANTHROPIC_LIKE)

    assert (empty.hit_ratio, empty.cost) == (0.0, 0.0)
    assert measure([], OPENAI_LIKE).calls == 0


@given(
    st.lists(st.tuples(st.binary(max_size=3), st.integers(0, 3000)), max_size=8),
    st.lists(st.tuples(st.binary(max_size=3), st.integers(0, 3000)), max_size=8),
)
def test_an_extended_prompt_is_never_a_break(previous, extension):
    """A prompt that extends the previous one is no break and shares all of the previous tokens."""
    before = [Unit(k, t) for k, t in previous]
    after = before + [Unit(k, t) for k, t in extension]
    call = cache_calls([before, after])[1]

    assert not call.prefix_break
    assert call.common_tokens == sum(t for _, t in previous)
    assert call.input_tokens == call.common_tokens + sum(t for _, t in extension)


def test_units_of_a_context_head_then_messages(rich_context):
    """System and tools make the first unit; then one unit per message; they sum to the context's tokens."""
    units = units_of(rich_context)

    assert len(units) == 1 + len(rich_context.messages)
    assert units[0].tokens == rich_context.system_tokens + rich_context.tools_tokens
    assert [x.tokens for x in units[1:]] == [m.tokens for m in rich_context.messages]
    assert sum(x.tokens for x in units) == rich_context.tokens
    assert len({x.key for x in units}) == len(units)


def test_unit_keys_follow_what_reaches_the_wire(rich_context, neutral):
    """Keys are stable across equal contexts, ignore sources and tokens, and change with text or system."""
    same = neutral.context(list(rich_context.messages), stable_prefix=2, tools=rich_context.tools)
    resourced = neutral.context(
        [msgspec.structs.replace(m, sources=(99,), tokens=m.tokens + 1) for m in rich_context.messages],
        tools=rich_context.tools,
    )
    edited = neutral.context(
        [*rich_context.messages[:-1], neutral.message("user", "Memory: changed.", kind="injection")],
        tools=rich_context.tools,
    )
    other_system = neutral.context(list(rich_context.messages), tools=rich_context.tools, system="Be brief.")
    keys = [x.key for x in units_of(rich_context)]

    assert [x.key for x in units_of(same)] == keys
    assert [x.key for x in units_of(resourced)] == keys
    assert [x.key for x in units_of(edited)] == [*keys[:-1], units_of(edited)[-1].key] != keys
    assert [x.key for x in units_of(other_system)][1:] == keys[1:]
    assert units_of(other_system)[0].key != keys[0]


def test_growing_renders_measure_as_one_extension_per_call(rich_context, neutral):
    """Renders that only append messages share their whole previous prompt: no break, full reuse."""
    msgs = list(rich_context.messages)
    renders = [
        neutral.context(msgs[:n], tools=rich_context.tools, system="S" * 8000)
        for n in range(3, len(msgs) + 1)
    ]
    calls = cache_calls(units_of(r) for r in renders)

    assert [c.prefix_break for c in calls] == [False] * len(renders)
    assert all(c.common_tokens == p.tokens for c, p in zip(calls[1:], renders, strict=False))
