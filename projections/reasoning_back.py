"""Which assistant messages of a rendered context go back with their signed reasoning (the current turn's)."""

from __future__ import annotations

from contextledger.projections.context import RenderedContext

__all__ = ["REASONING_RULES", "REASONING_WIRES", "RULES_KEY", "reasoning_rules_of", "turn_replies"]

REASONING_RULES = 2
"""Which assistant messages go back with their signed reasoning, and how: 1, whole ones whose reasoning has a
text (or kept blocks or hosted items), a Responses item with one summary part even when its text is empty;
2, whole or cut ones, with a signature alone enough, and no summary part for an empty text (ADR 0088). A
request's record keeps the rules it was built under (``RULES_KEY``); one without was built under 1."""
RULES_KEY = "reasoning_rules"
"""Key of a ``ModelCallRecorded``'s ``meta``: the ``REASONING_RULES`` its payload was built under."""
REASONING_WIRES = frozenset({"anthropic", "openai-responses"})
"""The wires that send signed reasoning back (thinking blocks, encrypted reasoning items)."""

_KINDS = {1: frozenset({"message"}), 2: frozenset({"message", "truncated"})}
"""The kinds of assistant message that go back with their reasoning, by rules: whole (1), or cut too (2).

The reasoning is not the text: a message cut to the per-message cap still carries its thinking unchanged,
and Anthropic refuses a tool-use turn whose assistant message lost the thinking it began with."""


def reasoning_rules_of(meta: dict[str, object]) -> int:
    """The ``REASONING_RULES`` a recorded call's payload was built under (1 for a record from before them)."""
    rules = meta.get(RULES_KEY, 1)
    return rules if isinstance(rules, int) else 1


def turn_replies(context: RenderedContext, rules: int = REASONING_RULES) -> dict[int, int]:
    """Assistant messages after the last user message that go back with their reasoning: index -> position."""
    kinds = _KINDS[2 if rules >= REASONING_RULES else 1]
    last_user = max(
        (i for i, m in enumerate(context.messages) if m.role == "user" and m.kind == "message"),
        default=-1,
    )
    return {
        index: message.sources[0]
        for index in range(last_user + 1, len(context.messages))
        if (message := context.messages[index]).role == "assistant"
        and message.kind in kinds
        and message.sources
    }
