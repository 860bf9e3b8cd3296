"""Policies from TOML files (validated by pydantic, with clear errors) or preset names."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from contextledger.domain.errors import ConfigError
from contextledger.projections.policy import Policy
from contextledger.projections.presets import PRESETS, get_preset

__all__ = ["load_policy_file", "parse_policy", "resolve_policy"]


def parse_policy(data: dict[str, Any], *, source: str = "policy") -> Policy:
    """Validate a policy mapping (``Policy.parse``: ``base = "<preset>"`` starts from a preset).

    Raises:
        ConfigError: Unknown preset or key, negative budget, low-water above high-water, etc.
    """
    return Policy.parse(data, source=source)


def load_policy_file(path: str | Path) -> Policy:
    """Load a policy from a TOML file; its name defaults to the file's stem.

    Raises:
        ConfigError: The file is missing, is not valid TOML, or does not describe a valid policy.
    """
    file = Path(path)
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"policy file {file} does not exist") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"policy file {file} cannot be read: {error}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"policy file {file} is not valid TOML: {error}") from None
    data.setdefault("name", file.stem)
    return parse_policy(data, source=f"policy file {file}")


def resolve_policy(spec: str) -> Policy:
    """Return the policy a command line names: a preset name, or a path to a ``.toml`` file."""
    if spec in PRESETS:
        return PRESETS[spec]
    if spec.endswith(".toml") or Path(spec).is_file():
        return load_policy_file(spec)
    return get_preset(spec)
