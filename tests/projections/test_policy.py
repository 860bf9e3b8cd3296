"""Policies, presets and the budget value: validation errors and the seeds' numbers."""

from __future__ import annotations

import pytest
from contextledger.domain.errors import ConfigError
from contextledger.projections.budget import Budget
from contextledger.projections.policy import Policy
from contextledger.projections.presets import PRESETS, get_preset, preset_names
from contextledger.projections.reducers.retention import RetentionConfig


def test_unknown_key_is_named():
    """An unknown key is reported with its dotted path."""
    with pytest.raises(ConfigError, match=r"budget\.totl: unknown key"):
        Policy.parse({"budget": {"totl": 5}})


def test_negative_budget_is_refused():
    """A negative budget value is refused with the value shown."""
    with pytest.raises(ConfigError, match=r"budget\.total: .*greater than 0 \(got -5\)"):
        Policy.parse({"budget": {"total": -5}})
    with pytest.raises(ConfigError, match=r"budget\.output_reserve"):
        Policy.parse({"budget": {"output_reserve": -1}})


def test_low_water_above_high_water_is_refused():
    """low_water above high_water is refused, naming both."""
    with pytest.raises(ConfigError, match=r"low_water \(0\.9\) must not be above high_water \(0\.5\)"):
        Policy.parse({"budget": {"high_water": 0.5, "low_water": 0.9}})


def test_reserves_larger_than_the_window_are_refused():
    """A budget whose reserves leave no prompt room is refused."""
    with pytest.raises(ConfigError, match="no prompt room"):
        Policy.parse({"budget": {"total": 1000, "output_reserve": 600, "injection_reserve": 400}})
    with pytest.raises(ConfigError, match="no prompt room"):
        Budget(total=100, output_reserve=100)


def test_threshold_preset_triggers_at_93600_tokens():
    """Seed 004: (128k - 2k - 4k - 5k) x 0.80 = 93,600 tokens."""
    budget = get_preset("threshold").budget.build()
    assert budget.high_mark == 93_600


def test_nexus_and_blocks_marks():
    """Seed 000 compacts 20k below the target; seed 002 at 0.90 - 0.05 = 85% of it."""
    nexus = get_preset("nexus").budget.build()
    assert nexus.high_mark == nexus.target - 20_000
    blocks = get_preset("blocks").budget.build()
    assert blocks.high_mark == int(blocks.target * 0.85)
    assert get_preset("blocks").summary.max_tokens == 2_000
    assert get_preset("blocks").truncation.max_lines == 50


def test_every_preset_is_valid_and_named():
    """Every preset validates, round-trips through a dict and has the name it is listed under."""
    assert preset_names() == ["default", "blocks", "threshold", "nexus", "clip-archive"]
    for name, policy in PRESETS.items():
        assert policy.name == name
        assert Policy.parse(policy.model_dump()) == policy
    with pytest.raises(ConfigError, match="unknown policy 'nope'"):
        get_preset("nope")


def test_prompt_limit_override_resizes_the_window():
    """with_prompt_limit keeps the reserves and makes the prompt limit exactly the given size."""
    budget = Budget(total=128_000, output_reserve=4_000, safety_margin=1_000, injection_reserve=500)
    resized = budget.with_prompt_limit(32_000)
    assert resized.prompt_limit == 32_000
    assert resized.target == 31_500
    with pytest.raises(ConfigError):
        budget.with_prompt_limit(0)


def test_per_tool_retention_overrides_only_the_fields_it_sets():
    """A tool's override replaces the default's fields it sets and inherits the rest."""
    config = RetentionConfig.model_validate(
        {"default": {"keep_turns": 3, "keep_steps": 10}, "tools": {"read_file": {"keep_last": 2}}}
    )
    rule = config.rule_for("read_file")
    assert (rule.keep_turns, rule.keep_steps, rule.keep_last) == (3, 10, 2)
    assert config.rule_for("bash") == config.default


@pytest.mark.parametrize(
    "fields",
    [
        {"total": 0},
        {"output_reserve": -1},
        {"headroom": -3},
        {"high_water": 1.5},
        {"message_cap": 0.0},
        {"high_water": 0.5, "low_water": 0.8},
        {"total": 1000, "output_reserve": 600, "injection_reserve": 400},
    ],
)
def test_budget_rules_have_one_definition(fields):
    """The configured budget and the Budget value refuse the same values with the same words."""
    values = {"total": 10_000} | fields
    with pytest.raises(ConfigError) as direct:
        Budget(**values)
    with pytest.raises(ConfigError) as configured:
        Policy.parse({"budget": values})
    assert str(configured.value).removeprefix("invalid policy: budget").lstrip(".: ") == str(direct.value)


def test_parse_accepts_a_preset_base_like_a_policy_file():
    """``Policy.parse`` takes ``base`` (as a TOML file may): the preset, with the given keys overridden."""
    policy = Policy.parse(
        {"base": "default", "budget": {"total": 64_000}, "retention": {"tools": {"bash": {}}}}
    )
    default = get_preset("default")
    assert policy.budget.total == 64_000
    assert policy.budget.safety_margin == default.budget.safety_margin
    assert policy.retention.default == default.retention.default
    assert set(policy.retention.tools) == {"bash"}
    assert policy.truncation == default.truncation
    with pytest.raises(ConfigError, match=r"base: unknown preset 'nope'"):
        Policy.parse({"base": "nope"})


def test_check_tools_names_the_misspelt_key_and_the_closest_tool():
    """A retention key matching no tool of the session is a ConfigError naming it and a likely fix."""
    policy = Policy.parse({"retention": {"tools": {"read_fiel": {"keep_last": 2}, "bash": {}}}})
    policy.check_tools(["read_fiel", "bash"])
    with pytest.raises(
        ConfigError,
        match=r"retention\.tools\.read_fiel: no tool of this name in the session; did you mean 'read_file'",
    ) as raised:
        policy.check_tools(["read_file", "bash", "grep"])
    assert "the session's tools: bash, grep, read_file" in str(raised.value)


def test_a_file_total_inherits_the_base_reserves_and_says_so():
    """A total of 12,000 - output_reserve 4,000 on the default base leaves 6,000: its safety margin stays.

    ``--budget`` sets the prompt limit itself: the window becomes budget + reserves.
    """
    policy = Policy.parse({"base": "default", "budget": {"total": 12_000, "output_reserve": 4_000}})
    budget = policy.budget.build()
    assert budget.prompt_limit == 6_000
    assert budget.describe() == (
        "total 12,000 - output_reserve 4,000 - safety_margin 2,000 = prompt limit 6,000; "
        "- injection_reserve 0 = target 6,000; compact above 5,700 down to 3,000"
    )
    resized = budget.with_prompt_limit(32_000)
    assert (resized.total, resized.prompt_limit) == (38_000, 32_000)
