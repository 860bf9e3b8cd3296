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
