"""Preset policies expressing each design seed over the same log."""

from __future__ import annotations

from contextledger.domain.errors import ConfigError
from contextledger.projections.card_config import CardConfig
from contextledger.projections.policy import BudgetConfig, Policy
from contextledger.projections.reducers.retention import RetentionConfig, ToolRetention
from contextledger.projections.reducers.summary import SummaryConfig
from contextledger.projections.reducers.truncation import TruncationConfig
from contextledger.projections.reducers.window import WindowConfig

__all__ = ["PRESETS", "as_policy", "get_preset", "preset_names"]

CARD = CardConfig(history_note=True, history_as_of=True)
"""Every preset's card: the default one, opened by the line marking earlier requests as history (ADR 0090),
worded to stay true until the card is next refreshed (ADR 0093)."""

DEFAULT = Policy(
    name="default",
    description=(
        "seed 001: at 95% of the target compact in one chunk down to 50%: stub results older than "
        "3 turns or 10 steps, cut kept results to 4,000 tokens, show the latest summary, drop the "
        "oldest whole groups; pin the system prompt, the first task and the latest request"
    ),
    budget=BudgetConfig(
        total=128_000, output_reserve=8_000, safety_margin=2_000, high_water=0.95, low_water=0.5
    ),
    retention=RetentionConfig(default=ToolRetention(keep_turns=3, keep_steps=10)),
    truncation=TruncationConfig(max_tokens=4_000),
    summary=SummaryConfig(mode="latest", on_arrival=False, latest_within_room=True, exact_cover=True),
    window=WindowConfig(keep_first=1, keep_first_unit="turns", head_cap_strict=True, pin_whole_request=True),
    card=CARD,
)

BLOCKS = Policy(
    name="blocks",
    description=(
        "seed 002 (a loop is a user turn, its turns are our steps): keep_first 2 steps, keep_recent "
        "10 steps with tool outputs cut to 50 lines, summarised middle of at most 2,000 tokens, "
        "FixedCount(3) earlier turns in scope; compact at 0.90 - 0.05 headroom = 85%"
    ),
    budget=BudgetConfig(total=128_000, output_reserve=4_000, high_water=0.85, low_water=0.5),
    retention=RetentionConfig(enabled=False),
    truncation=TruncationConfig(max_lines=50),
    summary=SummaryConfig(
        mode="latest", max_tokens=2_000, on_arrival=False, latest_within_room=True, exact_cover=True
    ),
    window=WindowConfig(
        keep_first=2,
        keep_first_unit="steps",
        head_cap_strict=True,
        keep_recent=10,
        keep_recent_unit="steps",
        scope_turns=3,
        pin_whole_request=True,
    ),
    card=CARD,
)

THRESHOLD = Policy(
    name="threshold",
    description=(
        "seed 004: (128k - 2k system - 4k output - 5k safety) x 0.80 = 93,600 tokens triggers a "
        "compaction that keeps the last 10 messages (pair-safe) after the summary, which follows "
        "the system message"
    ),
    budget=BudgetConfig(
        total=128_000, output_reserve=4_000, safety_margin=7_000, high_water=0.8, low_water=0.8
    ),
    retention=RetentionConfig(enabled=False),
    truncation=TruncationConfig(enabled=False),
    summary=SummaryConfig(mode="latest", on_arrival=False, latest_within_room=True, exact_cover=True),
    window=WindowConfig(keep_first=0, keep_recent=10, keep_recent_unit="messages", pin_whole_request=True),
    card=CARD,
)

NEXUS = Policy(
    name="nexus",
    description=(
        "seed 000: compact when less than a 20k-token reserve is left, keeping ~30k tokens of recent "
        "context after the latest summary (and at most a quarter of the target, so small budgets "
        "keep their hysteresis)"
    ),
    budget=BudgetConfig(total=200_000, output_reserve=8_000, headroom=20_000, high_water=1.0, low_water=0.25),
    retention=RetentionConfig(enabled=False),
    truncation=TruncationConfig(enabled=False),
    summary=SummaryConfig(mode="latest", on_arrival=False, latest_within_room=True, exact_cover=True),
    window=WindowConfig(keep_first=0, keep_recent=30_000, keep_recent_unit="tokens", pin_whole_request=True),
    card=CARD,
)

CLIP_ARCHIVE = Policy(
    name="clip-archive",
    description=(
        "seed 003: the first 2 and last 2 summary batches stand for the archived history (the middle "
        "stays searchable in the log), then the recent verbatim tail; compact at 80% down to 40%"
    ),
    budget=BudgetConfig(total=128_000, output_reserve=4_000, high_water=0.8, low_water=0.4),
    retention=RetentionConfig(enabled=False),
    truncation=TruncationConfig(enabled=False),
    summary=SummaryConfig(
        mode="clip", clip_first=2, clip_last=2, on_arrival=False, clip_within_room=True, exact_cover=True
    ),
    window=WindowConfig(keep_first=1, keep_first_unit="turns", head_cap_strict=True, pin_whole_request=True),
    card=CARD,
)

PRESETS: dict[str, Policy] = {p.name: p for p in (DEFAULT, BLOCKS, THRESHOLD, NEXUS, CLIP_ARCHIVE)}
"""Every preset by name."""


def preset_names() -> list[str]:
    """Return the preset names."""
    return list(PRESETS)


def as_policy(policy: object) -> Policy:
    """Return the policy ``policy`` names: a preset name, or a ``Policy`` as it is.

    Raises:
        ConfigError: an unknown preset, or a value that is neither a name nor a ``Policy``.
    """
    chosen = get_preset(policy) if isinstance(policy, str) else policy
    if not isinstance(chosen, Policy):
        msg = f"a policy is a preset name or a Policy, not {type(policy).__name__}"
        raise ConfigError(msg)
    return chosen


def get_preset(name: str) -> Policy:
    """Return the preset called ``name``, or raise ``ConfigError`` listing the known ones."""
    try:
        return PRESETS[name]
    except KeyError:
        msg = f"unknown policy {name!r}: use one of {', '.join(PRESETS)} or a .toml file"
        raise ConfigError(msg) from None
