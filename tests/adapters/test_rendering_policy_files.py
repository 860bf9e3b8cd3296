"""Policies from TOML files: presets as a base, clear errors for every mistake."""

from __future__ import annotations

import pytest
from contextledger.adapters.policy_files import load_policy_file, parse_policy, resolve_policy
from contextledger.domain.errors import ConfigError
from contextledger.projections.presets import get_preset


def test_a_file_overrides_a_preset_base(tmp_path):
    """``base`` starts from a preset; the file's keys override it and the file names the policy."""
    path = tmp_path / "mine.toml"
    path.write_text('base = "blocks"\n[budget]\ntotal = 64000\n[window]\nkeep_recent = 5\n')
    policy = load_policy_file(path)
    assert policy.name == "mine"
    assert policy.budget.total == 64_000
    assert policy.window.keep_recent == 5
    assert policy.window.scope_turns == get_preset("blocks").window.scope_turns
    assert policy.truncation.max_lines == 50


def test_every_mistake_is_named(tmp_path):
    """Unknown keys, negative budgets, inverted water marks, bad TOML and missing files raise ConfigError."""
    cases = {
        "[retention.default]\nkeep_turns = 2\nkeep_turn = 3\n": r"retention\.default\.keep_turn: unknown key",
        "[budget]\ntotal = -1\n": r"budget\.total: Input should be greater than 0 \(got -1\)",
        "[budget]\nhigh_water = 0.5\nlow_water = 0.8\n": (
            r"low_water \(0\.8\) must not be above high_water \(0\.5\)"
        ),
        "[budget\n": "is not valid TOML",
        'base = "nope"\n': "base: unknown preset 'nope'",
    }
    for i, (text, message) in enumerate(cases.items()):
        path = tmp_path / f"p{i}.toml"
        path.write_text(text)
        with pytest.raises(ConfigError, match=message):
            load_policy_file(path)
    with pytest.raises(ConfigError, match="does not exist"):
        load_policy_file(tmp_path / "missing.toml")


def test_resolve_policy_takes_preset_names_and_files(tmp_path):
    """A preset name resolves to the preset, a .toml path to the file's policy."""
    assert resolve_policy("nexus") is get_preset("nexus")
    path = tmp_path / "p.toml"
    path.write_text("[summary]\nmode = 'clip'\n")
    assert resolve_policy(str(path)).summary.mode == "clip"
    assert parse_policy({"name": "x"}).name == "x"
    with pytest.raises(ConfigError, match="unknown policy"):
        resolve_policy("no-such-preset")


def test_a_value_of_the_wrong_type_is_refused_not_coerced(tmp_path):
    """A TOML value of the wrong type is a ConfigError naming the key: never a text read as a number.

    pydantic's lax mode took ``total = "64000"`` as 64,000, ``keep_recent = 5.0`` as 5 and
    ``enabled = "false"`` as False: a typo in a config file changed a policy silently.
    """
    cases = {
        '[budget]\ntotal = "64000"\n': r"budget\.total: Input should be a valid integer \(got '64000'\)",
        "[budget]\ntotal = 64000.0\n": r"budget\.total: Input should be a valid integer",
        "[window]\nkeep_recent = true\n": r"window\.keep_recent: Input should be a valid integer",
        '[retention.default]\nkeep_turns = "2"\n': r"keep_turns: Input should be a valid integer",
        '[summary]\nenabled = "false"\n': r"summary\.enabled: Input should be a valid boolean",
        "description = 1979-05-27\n": r"description: .*date",
    }
    for i, (text, message) in enumerate(cases.items()):
        path = tmp_path / f"p{i}.toml"
        path.write_text(text)
        with pytest.raises(ConfigError, match=message):
            load_policy_file(path)


def test_well_typed_values_still_load(tmp_path):
    """Integers where a float is asked, arrays where a tuple is asked and a preset base still load."""
    path = tmp_path / "typed.toml"
    path.write_text('base = "default"\n[budget]\ntotal = 32000\nhigh_water = 1\nlow_water = 0.5\n')
    policy = load_policy_file(path)
    assert policy.budget.total == 32_000
    assert policy.budget.high_water == 1.0
    assert parse_policy(policy.model_dump()) == policy
