"""Offline prompt-cache metrics over the consecutive prompts of a session: hit ratio, breaks, cost."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import msgspec
from contextledger.projections.context import RenderedContext, RenderedMessage

__all__ = [
    "ANTHROPIC_LIKE",
    "OPENAI_LIKE",
    "CacheModel",
    "CacheTotals",
    "CallCache",
    "Unit",
    "UnitMemo",
    "cache_calls",
    "common_prefix",
    "measure",
    "totals",
    "units_of",
]


class Unit(NamedTuple):
    """One cacheable unit of a prompt: a key equal for byte-identical units, and its token count."""

    key: bytes
    tokens: int


class CacheModel(msgspec.Struct, frozen=True, kw_only=True):
    """How a provider caches a common prefix and prices cached and uncached input tokens.

    A prefix shorter than ``min_tokens`` is not cached; a longer one is cached in ``step``-token
    increments (rounded down). Cost is in input-token equivalents.
    """

    name: str
    cached_rate: float
    uncached_rate: float
    min_tokens: int = 1024
    step: int = 1

    def cached(self, common_tokens: int) -> int:
        """Return how many tokens of a ``common_tokens``-long common prefix are read from cache.

        Args:
            common_tokens: The longest common prefix with the previous prompt, in tokens.

        Returns:
            0 below ``min_tokens``, else ``common_tokens`` rounded down to a multiple of ``step``.
        """
        if common_tokens < self.min_tokens:
            return 0
        return common_tokens // self.step * self.step

    def cost(self, cached: int, input_tokens: int) -> float:
        """Return the cost of ``input_tokens`` of which ``cached`` were read from cache.

        Args:
            cached: Tokens read from cache.
            input_tokens: All input tokens (cached included).

        Returns:
            ``cached_rate * cached + uncached_rate * (input_tokens - cached)``.
        """
        return self.cached_rate * cached + self.uncached_rate * (input_tokens - cached)


ANTHROPIC_LIKE = CacheModel(name="anthropic", cached_rate=0.1, uncached_rate=1.25)
"""Cached when the common prefix is ≥ 1,024 tokens; C = Σ 0.1·cached + 1.25·uncached (writes 1.25x)."""

OPENAI_LIKE = CacheModel(name="openai", cached_rate=0.5, uncached_rate=1.0, step=128)
"""Cached in 128-token steps from 1,024 tokens; C = Σ 0.5·cached + uncached."""


class CallCache(msgspec.Struct, frozen=True, kw_only=True):
    """One model call: its input tokens, the tokens it shares with the previous prompt, and a break.

    ``prefix_break`` is true when the previous prompt is not a prefix of this one (never for the
    first call of a session).
    """

    input_tokens: int
    common_tokens: int
    prefix_break: bool


class CacheTotals(msgspec.Struct, frozen=True, kw_only=True):
    """Sums over calls under one ``CacheModel``; add totals of several sessions with ``+``."""

    model: CacheModel
    calls: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    prefix_breaks: int = 0

    @property
    def hit_ratio(self) -> float:
        """H = Σ cached / Σ input (0.0 when there was no input)."""
        return self.cached_tokens / self.input_tokens if self.input_tokens else 0.0

    @property
    def cost(self) -> float:
        """C = Σ over calls of the model's cost; linear, so computed from the sums."""
        return self.model.cost(self.cached_tokens, self.input_tokens)

    def __add__(self, other: CacheTotals) -> CacheTotals:
        """Return the totals of both sets of calls (same model only)."""
        if other.model != self.model:
            raise ValueError(f"cannot add {other.model.name} totals to {self.model.name} totals")
        return CacheTotals(
            model=self.model,
            calls=self.calls + other.calls,
            input_tokens=self.input_tokens + other.input_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            prefix_breaks=self.prefix_breaks + other.prefix_breaks,
        )


def common_prefix(previous: Sequence[Unit], current: Sequence[Unit]) -> tuple[int, bool]:
    """Return the tokens of the leading units two prompts share, and whether ``previous`` is a prefix.

    Units compare by key; the count is message-granular (a unit that differs ends the prefix).

    Args:
        previous: The units of the previous prompt.
        current: The units of this prompt.

    Returns:
        ``(common_tokens, previous_is_prefix_of_current)``.
    """
    tokens = 0
    shared = 0
    for before, now in zip(previous, current, strict=False):
        if before.key != now.key:
            break
        tokens += now.tokens
        shared += 1
    return tokens, shared == len(previous)


def cache_calls(prompts: Iterable[Sequence[Unit]]) -> list[CallCache]:
    """Return one ``CallCache`` per prompt of one session, each compared with the prompt before it.

    Only the previous prompt is kept, so ``prompts`` may be a generator over a long session.

    Args:
        prompts: The prompts of consecutive model calls, each a sequence of units.

    Returns:
        The calls in order; the first has no common prefix and no break.
    """
    calls: list[CallCache] = []
    previous: Sequence[Unit] | None = None
    for prompt in prompts:
        input_tokens = sum(unit.tokens for unit in prompt)
        if previous is None:
            calls.append(CallCache(input_tokens=input_tokens, common_tokens=0, prefix_break=False))
        else:
            common, is_prefix = common_prefix(previous, prompt)
            calls.append(
                CallCache(input_tokens=input_tokens, common_tokens=common, prefix_break=not is_prefix)
            )
        previous = prompt
    return calls


def totals(calls: Iterable[CallCache], model: CacheModel) -> CacheTotals:
    """Return the sums of ``calls`` under ``model``: input, cached tokens and prefix breaks.

    Args:
        calls: Calls as ``cache_calls`` returns them.
        model: The cache and price model, e.g. ``ANTHROPIC_LIKE`` or ``OPENAI_LIKE``.

    Returns:
        The totals; ``hit_ratio`` and ``cost`` derive from them.
    """
    count = input_tokens = cached = breaks = 0
    for call in calls:
        count += 1
        input_tokens += call.input_tokens
        cached += model.cached(call.common_tokens)
        breaks += call.prefix_break
    return CacheTotals(
        model=model, calls=count, input_tokens=input_tokens, cached_tokens=cached, prefix_breaks=breaks
    )


def measure(prompts: Iterable[Sequence[Unit]], model: CacheModel) -> CacheTotals:
    """Return the cache totals of one session's consecutive prompts under ``model``.

    Args:
        prompts: The prompts of consecutive model calls of one session.
        model: The cache and price model.

    Returns:
        ``totals(cache_calls(prompts), model)``.
    """
    return totals(cache_calls(prompts), model)


def units_of(ctx: RenderedContext, memo: UnitMemo | None = None) -> tuple[Unit, ...]:
    """Return the cache units of a rendered context: system and tools as one unit, then each message.

    Keys are 16-byte BLAKE2b digests of the msgspec (msgpack) encoding of what reaches the wire:
    the system prompt and tool schemas for the first unit; role, kind, text, tool calls,
    ``tool_call_id`` and ``is_error`` for a message (not ``sources``, ``tokens`` or ``tool_name``).
    Equal contexts give equal keys in every process. Token counts are the context's own, so the
    units sum to ``system_tokens + tools_tokens + Σ message tokens``.

    Args:
        ctx: A rendered context.
        memo: The keys of the previous context of the same session (``UnitMemo``): the consecutive
            prompts of a session repeat most units, and a unit seen before is not digested again
            (the keys are the same as without it).

    Returns:
        ``1 + len(ctx.messages)`` units.
    """
    if memo is None:
        head = Unit(_digest(("head", ctx.system, ctx.tools)), ctx.system_tokens + ctx.tools_tokens)
        return (head, *(Unit(_digest(_wire_fields(m)), m.tokens) for m in ctx.messages))
    return memo.units(ctx)


class UnitMemo:
    """Remembers the unit keys of one context for the next.

    A message object (frozen) seen again, or a message with the same wire fields, keeps its key;
    only the last context's keys are held.
    """

    def __init__(self) -> None:
        """Start with no key known."""
        self._by_object: dict[int, tuple[RenderedMessage, bytes]] = {}
        self._by_fields: dict[tuple[object, ...], bytes] = {}

    def units(self, ctx: RenderedContext) -> tuple[Unit, ...]:
        """Return ``units_of(ctx)``, digesting only units the previous context did not have."""
        by_object, by_fields = self._by_object, self._by_fields
        now_object: dict[int, tuple[RenderedMessage, bytes]] = {}
        now_fields: dict[tuple[object, ...], bytes] = {}
        head = _keyed(("head", ctx.system, ctx.tools), by_fields, now_fields)
        units = [Unit(head, ctx.system_tokens + ctx.tools_tokens)]
        for message in ctx.messages:
            known = by_object.get(id(message))
            if known is not None and known[0] is message:
                key = known[1]
            else:
                key = _keyed(_wire_fields(message), by_fields, now_fields)
            now_object[id(message)] = (message, key)
            units.append(Unit(key, message.tokens))
        self._by_object, self._by_fields = now_object, now_fields
        return tuple(units)


def _keyed(
    fields: tuple[object, ...],
    before: dict[tuple[object, ...], bytes],
    now: dict[tuple[object, ...], bytes],
) -> bytes:
    """The digest of ``fields``: the previous context's when it had equal fields, else computed."""
    try:
        key = before.get(fields)
    except TypeError:  # a field holds a dict (a tool's JSON schema): digested, never remembered
        return _digest(fields)
    if key is None:
        key = _digest(fields)
    now[fields] = key
    return key


def _wire_fields(message: RenderedMessage) -> tuple[object, ...]:
    return (
        "message",
        message.role,
        message.kind,
        message.text,
        message.tool_calls,
        message.tool_call_id,
        message.is_error,
    )


def _digest(value: object) -> bytes:
    return hashlib.blake2b(msgspec.msgpack.encode(value), digest_size=16).digest()
