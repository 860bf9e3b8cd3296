"""The token budget threaded through the reducers: limits, reserves, water marks and tier caps."""

from __future__ import annotations

import math
from functools import cached_property

import msgspec
from contextledger.domain.errors import ConfigError
from contextledger.domain.limits import MAX_TOKENS
from contextledger.projections.provider_cache import parse_ttl

__all__ = ["Budget"]


class Budget(msgspec.Struct, frozen=True, kw_only=True, dict=True):
    """Every token level a render is held to, derived from the model window.

    ``prompt_limit`` (window minus output reserve and safety margin) is what a request may hold;
    reduction targets ``target`` (prompt limit minus the injection reserve) so injected content
    always fits. Compaction starts above ``high_mark`` and evicts down to ``low_mark``.
    New fields (more tier caps) can be added without changing the reducer signature.

    The one declaration of the budget's fields, types and defaults: a policy's ``[budget]`` table
    (``policy.BudgetConfig``) is derived from these fields.

    Attributes:
        total: The model's context window in tokens.
        output_reserve: Tokens kept free for the model's answer.
        injection_reserve: Tokens kept free for injection hooks (added after reduction).
        safety_margin: Tokens kept free for tokenizer error.
        high_water: Fraction of ``target`` above which a compaction point fires.
        low_water: Fraction of ``target`` a compaction evicts down to.
        headroom: If set, compaction fires ``headroom`` tokens below ``target`` instead of at
            ``high_water`` (never below half the target).
        tool_results_cap: If set, tool results may use at most this fraction of ``target``;
            crossing it is a compaction point that stubs the oldest results.
        head_cap: Fraction of ``target`` the pinned head (``keep_first``) may use.
        message_cap: Fraction of ``target`` one message may use; larger ones are truncated on arrival.
        compact_on_cache_expiry: If set (a provider cache TTL such as ``"5m"`` or ``"1h"``, or
            seconds), the first event more than this after the previous one is a compaction point
            down to ``low_mark`` when the context is above it: the prompt cache has expired, so
            the prefix is rewritten anyway (``projections.cache_aware``).
    """

    total: int = 128_000
    output_reserve: int = 4_000
    injection_reserve: int = 0
    safety_margin: int = 0
    high_water: float = 0.9
    low_water: float = 0.6
    headroom: int | None = None
    tool_results_cap: float | None = None
    head_cap: float = 0.15
    message_cap: float = 0.25
    compact_on_cache_expiry: str | float | None = None

    def __post_init__(self) -> None:
        """Reject inconsistent levels with a ``ConfigError`` (the only place these rules live).

        A problem with one field starts its message with the field's name and a colon, which
        ``policy_error`` turns into the key's dotted path (``budget.total: ...``).
        """
        if self.total <= 0:
            raise ConfigError(f"total: Input should be greater than 0 (got {self.total})")
        self._check_token_counts()
        for name in ("high_water", "low_water", "tool_results_cap", "head_cap", "message_cap"):
            value = getattr(self, name)
            if value is not None and not 0 < value <= 1:
                raise ConfigError(f"{name}: Input should be a fraction in (0, 1] (got {value})")
        if self.compact_on_cache_expiry is not None:
            try:
                parse_ttl(self.compact_on_cache_expiry)
            except ConfigError as error:
                raise ConfigError(f"compact_on_cache_expiry: {error}") from None
        if self.low_water > self.high_water:
            raise ConfigError(
                f"low_water ({self.low_water}) must not be above high_water ({self.high_water})"
            )
        if self.target <= 0:
            raise ConfigError(
                f"total ({self.total}) leaves no prompt room: total - output_reserve "
                f"{self.output_reserve} - safety_margin {self.safety_margin} - injection_reserve "
                f"{self.injection_reserve} = {self.target}"
            )

    @cached_property
    def cache_expiry_seconds(self) -> float | None:
        """The cache TTL of ``compact_on_cache_expiry`` in seconds, or None without the option."""
        if self.compact_on_cache_expiry is None:
            return None
        return parse_ttl(self.compact_on_cache_expiry)

    @cached_property
    def prompt_limit(self) -> int:
        """Tokens a request may hold: the window minus output reserve and safety margin."""
        return self.total - self.output_reserve - self.safety_margin

    @cached_property
    def target(self) -> int:
        """Tokens the reduced context may hold: the prompt limit minus the injection reserve."""
        return self.prompt_limit - self.injection_reserve

    @cached_property
    def high_mark(self) -> int:
        """Token level above which a compaction point fires."""
        if self.headroom is not None:
            return max(self.target - self.headroom, self.target // 2)
        return math.floor(self.target * self.high_water)

    @cached_property
    def low_mark(self) -> int:
        """Token level a compaction evicts down to (never above the high mark)."""
        return min(math.floor(self.target * self.low_water), self.high_mark)

    @cached_property
    def tool_cap(self) -> int | None:
        """Tokens tool results may use, or None without a tool-result tier cap."""
        if self.tool_results_cap is None:
            return None
        return math.floor(self.target * self.tool_results_cap)

    @cached_property
    def tool_low(self) -> int | None:
        """Tokens tool results are reduced to when their cap fires (cap scaled by low/high water)."""
        cap = self.tool_cap
        if cap is None:
            return None
        return math.floor(cap * self.low_water / self.high_water)

    @cached_property
    def head_tokens(self) -> int:
        """Tokens the pinned head may use."""
        return math.floor(self.target * self.head_cap)

    @cached_property
    def message_tokens(self) -> int:
        """Tokens one message may use before it is truncated on arrival."""
        return max(math.floor(self.target * self.message_cap), 16)

    def describe(self) -> str:
        """Return how the levels derive from each other, e.g. for ``render --json`` or an error message.

        ``total 12,000 - output_reserve 4,000 - safety_margin 2,000 = prompt limit 6,000; -
        injection_reserve 0 = target 6,000; compact above 5,700 down to 3,000``.
        """
        return (
            f"total {self.total:,} - output_reserve {self.output_reserve:,} - safety_margin "
            f"{self.safety_margin:,} = prompt limit {self.prompt_limit:,}; - injection_reserve "
            f"{self.injection_reserve:,} = target {self.target:,}; compact above {self.high_mark:,} "
            f"down to {self.low_mark:,}"
        )

    def _check_token_counts(self) -> None:
        for name in ("total", "output_reserve", "injection_reserve", "safety_margin", "headroom"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ConfigError(f"{name}: Input should be greater than or equal to 0 (got {value})")
            if value is not None and value > MAX_TOKENS:
                raise ConfigError(f"{name}: Input should be at most {MAX_TOKENS:,} tokens (got {value:,})")

    def with_prompt_limit(self, prompt_limit: int) -> Budget:
        """Return this budget with the window resized so that ``prompt_limit`` is exactly as given.

        Raises:
            ConfigError: ``prompt_limit`` is not a whole number of tokens above 0, or the window it needs
                (with the output reserve and safety margin) is over ``MAX_TOKENS``.
        """
        if isinstance(prompt_limit, bool) or not isinstance(prompt_limit, int):
            raise ConfigError(f"budget must be a whole number of tokens, not {prompt_limit!r}")
        if prompt_limit <= 0:
            raise ConfigError(f"budget must be positive, got {prompt_limit}")
        most = MAX_TOKENS - self.output_reserve - self.safety_margin
        if prompt_limit > most:
            raise ConfigError(
                f"budget must be at most {most:,} tokens ({MAX_TOKENS:,} less the output reserve "
                f"{self.output_reserve:,} and safety margin {self.safety_margin:,}), got {prompt_limit:,}"
            )
        return msgspec.structs.replace(self, total=prompt_limit + self.output_reserve + self.safety_margin)
