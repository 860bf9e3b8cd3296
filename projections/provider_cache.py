"""Provider prompt-cache models with TTL: which prefix tokens a call reads, writes and pays, by timestamp."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Literal

import msgspec
from contextledger.domain.errors import ConfigError
from contextledger.projections.cache_metrics import Unit

__all__ = [
    "CacheCall",
    "CacheSimulator",
    "ProviderCache",
    "ProviderName",
    "parse_ttl",
    "provider_cache",
]

ProviderName = Literal["anthropic", "openai"]
_TTL = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*$")
_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600}
LOOKBACK_UNITS = 20
"""Anthropic looks for an earlier cache entry at most 20 blocks before each breakpoint."""


def parse_ttl(value: str | float) -> float:
    """Return a duration such as ``"5m"``, ``"1h"``, ``"300s"`` or ``300`` in seconds.

    Raises:
        ConfigError: For anything else, or a duration that is not positive.
    """
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        match = _TTL.match(value)
        if match is None:
            raise ConfigError(f"invalid duration {value!r}: use e.g. 300, '300s', '5m' or '1h'")
        seconds = float(match.group(1)) * _SECONDS[match.group(2)]
    if seconds <= 0:
        raise ConfigError(f"invalid duration {value!r}: must be positive")
    return seconds


class ProviderCache(msgspec.Struct, frozen=True, kw_only=True):
    """How one provider caches prompt prefixes and prices input tokens (in input-token equivalents).

    Anthropic (``breakpoints``): an entry is written at each cache breakpoint of a request whose
    prefix holds at least ``min_tokens``; a later request reads the longest live entry that is a
    prefix of it, found within ``LOOKBACK_UNITS`` units before one of its breakpoints. Tokens between
    the read prefix and the last breakpoint are written (``write_rate``), the rest are plain input.
    OpenAI (no breakpoints): the longest live common prefix with an earlier request is read, 0 below
    ``min_tokens`` and rounded down to a multiple of ``step``; writes cost plain input.
    An entry lives ``ttl`` seconds after its last write or read (reads refresh it).
    """

    name: ProviderName
    ttl: float
    read_rate: float
    write_rate: float
    min_tokens: int = 1024
    step: int = 1
    breakpoints: int = 0
    """How many breakpoints a request may place (0: automatic prefix caching)."""

    def cost(self, *, input_tokens: int, cached: int, written: int) -> float:
        """Return ``read_rate * cached + write_rate * written + 1.0 * the rest``."""
        return self.read_rate * cached + self.write_rate * written + (input_tokens - cached - written)


def provider_cache(provider: str, ttl: str | float = "5m") -> ProviderCache:
    """Return the cache model of ``provider`` (``anthropic`` or ``openai``) with cache lifetime ``ttl``.

    Anthropic: reads 0.1x, writes 1.25x with the 5-minute TTL and 2x with a longer one, 4
    breakpoints, 1,024-token minimum. OpenAI: reads 0.5x (gpt-4o), writes 1x, from 1,024 tokens in
    128-token steps (prefixes stay 5-10 minutes, up to an hour; ``ttl`` picks one).

    Raises:
        ConfigError: For another provider or a bad ``ttl``.
    """
    seconds = parse_ttl(ttl)
    if provider == "anthropic":
        write = 1.25 if seconds <= 300 else 2.0  # noqa: PLR2004 - the 5-minute cache is the cheap one
        return ProviderCache(name="anthropic", ttl=seconds, read_rate=0.1, write_rate=write, breakpoints=4)
    if provider == "openai":
        return ProviderCache(name="openai", ttl=seconds, read_rate=0.5, write_rate=1.0, step=128)
    raise ConfigError(f"unknown provider {provider!r}: use anthropic or openai")


class CacheCall(msgspec.Struct, frozen=True, kw_only=True):
    """One call under a provider cache model.

    ``prefix_break``: the previous prompt is not a prefix of this one. ``expired``: the previous
    call's cache entries had expired (gap longer than the TTL) before this call.
    """

    input_tokens: int
    cached_tokens: int
    written_tokens: int
    cost: float
    prefix_break: bool
    expired: bool
    gap_seconds: float | None


def _chain(units: Sequence[Unit], known: tuple[Sequence[Unit], list[bytes]] | None = None) -> list[bytes]:
    """Return the key of each prefix: ``keys[k]`` identifies ``units[:k + 1]``.

    ``known``, if given, is an earlier prompt's units and their chain: the keys of the units they
    share as a prefix are taken from it, and only the rest are hashed (the same keys).
    """
    keys: list[bytes] = []
    running = b""
    start = 0
    if known is not None:
        before, chain = known
        limit = min(len(before), len(units))
        while start < limit and before[start].key == units[start].key:
            start += 1
        if start:
            keys = chain[:start]
            running = keys[-1]
    for unit in units[start:]:
        running = hashlib.blake2b(running + unit.key, digest_size=16).digest()
        keys.append(running)
    return keys


def _is_prefix(before: list[bytes], now: list[bytes]) -> bool:
    """Return whether the prompt with prefix keys ``before`` is a prefix of the one with ``now``."""
    return not before or (len(before) <= len(now) and now[len(before) - 1] == before[-1])


class CacheSimulator:
    """Feeds one session's calls, in order, through a ``ProviderCache``; pure apart from its own entries.

    Args:
        model: The provider cache model.
    """

    def __init__(self, model: ProviderCache) -> None:
        """Start with an empty cache."""
        self.model = model
        self._entries: dict[bytes, float] = {}
        """Prefix key -> time of its last write or read, in seconds."""
        self._previous: tuple[list[bytes], float | None] | None = None
        self._known: tuple[Sequence[Unit], list[bytes]] | None = None
        """The last call's units and prefix keys (a call's keys extend the prefix it shares)."""

    def call(self, units: Sequence[Unit], at: datetime | None, *, stable: int = 0) -> CacheCall:
        """Return what the call with ``units`` at time ``at`` reads, writes and costs, and record its entries.

        Args:
            units: The prompt's cache units (``cache_metrics.units_of``).
            at: When the call was made; None counts as no time elapsed since the previous call.
            stable: How many leading units after the head change only at compaction points (the
                pinned head and summaries): Anthropic's middle breakpoint goes after them.

        Returns:
            The call's cached, written and plain tokens and cost.
        """
        model = self.model
        keys = _chain(units, self._known)
        self._known = (units, keys)
        ends = [0] * len(units)
        total = 0
        for index, unit in enumerate(units):
            total += unit.tokens
            ends[index] = total
        previous = self._previous
        now = at.timestamp() if at is not None else None
        last = previous[1] if previous is not None else None
        gap = now - last if now is not None and last is not None else None
        clock = now if now is not None else (last if last is not None else 0.0)
        expired = gap is not None and gap > model.ttl
        self._entries = {k: t for k, t in self._entries.items() if clock - t <= model.ttl}
        prefix_break = previous is not None and not _is_prefix(previous[0], keys)
        points = self._breakpoints(len(units), stable) if model.breakpoints else []
        read = self._read(keys, ends, points)
        cached = ends[read - 1] if read else 0
        written = 0
        if model.breakpoints:
            for point in points:
                if ends[point - 1] >= model.min_tokens:
                    self._entries[keys[point - 1]] = clock
            last_point = points[-1] if points else 0
            if last_point and ends[last_point - 1] >= model.min_tokens:
                written = max(ends[last_point - 1] - cached, 0)
        else:
            cached = 0 if cached < model.min_tokens else cached // model.step * model.step
            for index in range(len(keys)):
                if ends[index] >= model.min_tokens:
                    self._entries[keys[index]] = clock
        if read:
            self._entries[keys[read - 1]] = clock
        self._previous = (keys, now if now is not None else last)
        return CacheCall(
            input_tokens=total,
            cached_tokens=cached,
            written_tokens=written,
            cost=model.cost(input_tokens=total, cached=cached, written=written),
            prefix_break=prefix_break,
            expired=expired,
            gap_seconds=gap,
        )

    def _breakpoints(self, count: int, stable: int) -> list[int]:
        """Return the prefix lengths (in units) where breakpoints go: head, stable prefix, last message."""
        points = sorted({p for p in (1, 1 + stable, count) if 0 < p <= count})
        return points[-self.model.breakpoints :]

    def _read(self, keys: list[bytes], ends: list[int], points: list[int]) -> int:
        """Return the length in units of the longest live entry this prompt can read (0: none)."""
        if self.model.breakpoints:
            candidates: set[int] = set()
            for point in points:
                candidates.update(range(max(point - LOOKBACK_UNITS, 1), point + 1))
            for length in sorted(candidates, reverse=True):
                if keys[length - 1] in self._entries and ends[length - 1] >= self.model.min_tokens:
                    return length
            return 0
        for length in range(len(keys), 0, -1):
            if keys[length - 1] in self._entries:
                return length
        return 0
