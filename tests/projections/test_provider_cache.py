"""Provider cache models with synthetic prompts and timestamps: TTL, minimum length, steps, breakpoints."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from contextledger.domain.errors import ConfigError
from contextledger.projections.cache_metrics import Unit
from contextledger.projections.provider_cache import CacheSimulator, parse_ttl, provider_cache

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _units(*sizes: int, tag: str = "m") -> list[Unit]:
    """One unit per size; equal tags and indexes give equal keys."""
    return [Unit(f"{tag}{i}".encode(), size) for i, size in enumerate(sizes)]


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_anthropic_reads_within_the_ttl_and_loses_the_prefix_after_it():
    """A 4-minute gap reads the prefix (0.1x); a 6-minute gap under the 5-minute TTL rewrites it (1.25x)."""
    sim = CacheSimulator(provider_cache("anthropic", "5m"))
    first = sim.call(_units(2000, 500), _at(0))
    assert (first.cached_tokens, first.written_tokens) == (0, 2500)
    assert first.cost == pytest.approx(1.25 * 2500)
    second = sim.call(_units(2000, 500, 300), _at(240))
    assert (second.cached_tokens, second.written_tokens, second.expired) == (2500, 300, False)
    assert second.cost == pytest.approx(0.1 * 2500 + 1.25 * 300)
    third = sim.call(_units(2000, 500, 300, 100), _at(240 + 360))
    assert (third.cached_tokens, third.written_tokens, third.expired) == (0, 2900, True)
    assert third.gap_seconds == pytest.approx(360)


def test_reads_refresh_the_entry_and_the_one_hour_cache_survives_long_gaps():
    """Calls every 4 minutes keep a 5-minute entry alive 20 minutes; 1h writes cost 2x, survive 50 min."""
    sim = CacheSimulator(provider_cache("anthropic", "5m"))
    sim.call(_units(3000), _at(0))
    for minute in (4, 8, 12, 16, 20):
        assert sim.call(_units(3000), _at(minute * 60)).cached_tokens == 3000
    hour = CacheSimulator(provider_cache("anthropic", "1h"))
    assert hour.call(_units(3000), _at(0)).cost == pytest.approx(2.0 * 3000)
    assert hour.call(_units(3000, 10), _at(50 * 60)).cached_tokens == 3000
    assert hour.call(_units(3000, 10), _at(50 * 60 + 3601)).cached_tokens == 0


def test_below_the_minimum_cacheable_length_nothing_is_written_or_read():
    """A 1,000-token prompt is plain input (1x) every time; a breakpoint prefix under 1,024 is not cached."""
    sim = CacheSimulator(provider_cache("anthropic"))
    for second in (0, 10):
        call = sim.call(_units(600, 400), _at(second))
        assert (call.cached_tokens, call.written_tokens, call.cost) == (0, 0, 1000)


def test_openai_caches_from_1024_tokens_in_128_token_steps():
    """A 1,500-token common prefix reads 1,408 tokens (0.5x); 1,000 tokens read nothing; no write fee."""
    sim = CacheSimulator(provider_cache("openai", "5m"))
    first = sim.call(_units(1000, 500, 200), _at(0))
    assert (first.cached_tokens, first.written_tokens, first.cost) == (0, 0, 1700)
    second = sim.call(_units(1000, 500, 300, tag="m")[:2] + _units(999, tag="x"), _at(30))
    assert second.cached_tokens == 1408
    assert second.prefix_break
    assert second.cost == pytest.approx(0.5 * 1408 + (2499 - 1408))
    third = sim.call(_units(1000, tag="m") + _units(77, tag="y"), _at(60))
    assert third.cached_tokens == 0
    late = CacheSimulator(provider_cache("openai", "5m"))
    late.call(_units(1000, 500), _at(0))
    assert late.call(_units(1000, 500), _at(301)).cached_tokens == 0


def test_the_stable_breakpoint_reads_the_head_after_the_history_changed():
    """After a compaction the head and summary (stable prefix) are read even 30 messages back."""
    sim = CacheSimulator(provider_cache("anthropic"))
    head = _units(1500, 400, tag="h")
    sim.call(head + _units(*[50] * 30, tag="a"), _at(0), stable=1)
    after = sim.call(head + _units(*[50] * 30, tag="b"), _at(10), stable=1)
    assert after.cached_tokens == 1900
    assert after.prefix_break
    no_stable = CacheSimulator(provider_cache("anthropic"))
    no_stable.call(head + _units(*[50] * 30, tag="a"), _at(0))
    assert no_stable.call(head + _units(*[50] * 30, tag="b"), _at(10)).cached_tokens == 1500


def test_missing_timestamps_count_as_no_time_elapsed():
    """Calls without ``at`` never expire (the importer may not know the times)."""
    sim = CacheSimulator(provider_cache("anthropic"))
    sim.call(_units(2000), None)
    call = sim.call(_units(2000, 5), None)
    assert (call.cached_tokens, call.expired, call.gap_seconds) == (2000, False, None)


@pytest.mark.parametrize(
    ("text", "seconds"), [("5m", 300), ("1h", 3600), ("90s", 90), ("300", 300), (42, 42)]
)
def test_parse_ttl(text, seconds):
    """Durations in s, m, h or bare seconds."""
    assert parse_ttl(text) == seconds


@pytest.mark.parametrize("bad", ["5 minutes", "", "0", "-1m"])
def test_bad_ttl_and_provider_are_config_errors(bad):
    """A bad duration or provider is a ConfigError."""
    with pytest.raises(ConfigError):
        parse_ttl(bad)
    with pytest.raises(ConfigError, match="unknown provider"):
        provider_cache("gemini")
