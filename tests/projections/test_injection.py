"""Injection hooks: placement next to the last user message, per-hook reserves, loud overflow."""

from __future__ import annotations

import pytest
from contextledger.domain.errors import ConfigError, InjectionOverflowError
from contextledger.projections.context import MESSAGE_OVERHEAD
from contextledger.projections.counting import count_context
from contextledger.projections.fold import Projector
from contextledger.projections.injection import StaticInjection, inject
from contextledger.projections.policy import Policy
from projection_helpers import Builder, Words, resolve

WORDS = Words()


def _context(injection_reserve: int = 50):
    builder = Builder()
    builder.user()
    builder.step(10)
    task = builder.user()
    builder.step(10)
    policy = Policy.parse(
        {"budget": {"total": 400, "output_reserve": 0, "injection_reserve": injection_reserve}}
    )
    projector = Projector(policy, WORDS)
    return projector, projector.render(projector.fold(builder.counted()), resolve), task


def test_injection_goes_right_after_the_last_user_message():
    """Injected content follows the last user message and is counted into the context's tokens."""
    projector, context, task = _context()
    hook = StaticInjection(name="memories", text="remember the blue door", reserve=20)
    out = inject(context, [hook], WORDS, injection_reserve=projector.budget.injection_reserve)
    index = next(i for i, m in enumerate(out.messages) if m.sources == (task,))
    assert out.messages[index + 1].kind == "injection"
    assert out.messages[index + 1].text == "remember the blue door"
    assert out.tokens == context.tokens + 4 + MESSAGE_OVERHEAD == count_context(out, WORDS)
    assert out.tokens <= out.budget


def test_injection_at_the_end_keeps_the_whole_prefix():
    """Placement ``end`` appends after everything, leaving the rendered messages untouched."""
    _, context, _ = _context()
    hook = StaticInjection(name="memories", text="note", reserve=20)
    out = inject(context, [hook], WORDS, injection_reserve=50, placement="end")
    assert out.messages[: len(context.messages)] == context.messages
    assert out.messages[-1].kind == "injection"
    assert out.stable_prefix == context.stable_prefix


def test_hook_over_its_reserve_raises_naming_it():
    """A hook producing more than its reserve raises InjectionOverflowError with the excess."""
    _, context, _ = _context()
    hook = StaticInjection(name="memories", text="word " * 30, reserve=20)
    produced = 30 + MESSAGE_OVERHEAD
    message = rf"'memories' produced {produced} tokens, over its reserve of 20 by {produced - 20}"
    with pytest.raises(InjectionOverflowError, match=message):
        inject(context, [hook], WORDS, injection_reserve=50)


def test_reserves_beyond_the_budget_reserve_are_a_config_error():
    """Hooks reserving more than the budget's injection reserve are refused before running."""
    projector, context, _ = _context(injection_reserve=10)
    hook = StaticInjection(name="memories", text="x", reserve=20)
    with pytest.raises(ConfigError, match="reserve 20 tokens but the budget's injection_reserve is 10"):
        inject(context, [hook], WORDS, injection_reserve=projector.budget.injection_reserve)
