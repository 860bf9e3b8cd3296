"""Render policies: a budget plus one config per reducer, as validated pydantic models."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from typing import Any, Self

import pydantic
from contextledger.domain.errors import ConfigError
from contextledger.projections.budget import Budget
from contextledger.projections.card_state import CardConfig
from contextledger.projections.reducers.guarantee import GuaranteeConfig
from contextledger.projections.reducers.retention import RetentionConfig
from contextledger.projections.reducers.summary import SummaryConfig
from contextledger.projections.reducers.truncation import TruncationConfig
from contextledger.projections.reducers.window import WindowConfig

__all__ = ["BudgetConfig", "Policy", "policy_error"]

_FIELD_MESSAGE = re.compile(r"[a-z_]+: ")


class BudgetConfig(pydantic.BaseModel):
    """The budget as configured; ``build()`` turns it into the ``Budget`` value reducers receive.

    The fields are typed here and validated by ``Budget`` alone (one definition of each rule);
    see ``Budget`` for what each level means.

    Attributes:
        total: Model context window in tokens.
        output_reserve: Tokens kept for the answer.
        injection_reserve: Tokens kept for injection hooks.
        safety_margin: Tokens kept for tokenizer error.
        high_water: Compaction fires above this fraction of the target.
        low_water: Compaction evicts down to this fraction of the target.
        headroom: Fire this many tokens below the target instead (seed 000's reserve).
        tool_results_cap: Tool results may use at most this fraction of the target.
        head_cap: The keep_first head may use at most this fraction of the target.
        message_cap: One message may use at most this fraction of the target.
        compact_on_cache_expiry: Compact down to the low-water mark at the first event after a gap
            longer than this provider cache TTL (``"5m"``, ``"1h"`` or seconds); None: never.
    """

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

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

    @pydantic.model_validator(mode="after")
    def _valid(self) -> Self:
        try:
            self.build()
        except ConfigError as error:
            raise ValueError(str(error)) from None
        return self

    def build(self) -> Budget:
        """Return the ``Budget`` value."""
        return Budget(**self.model_dump())


class Policy(pydantic.BaseModel):
    """A complete render policy: one budget and the config of each reducer, in pipeline order.

    Pipeline (cheap to expensive, at compaction points only): retention → truncation → summary →
    window → guarantee; then the session-state card (``card``) is refreshed within its cap.
    Load one from TOML with ``contextledger.adapters.policy_files``.
    """

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    name: str = "custom"
    description: str = ""
    budget: BudgetConfig = BudgetConfig()
    retention: RetentionConfig = RetentionConfig()
    truncation: TruncationConfig = TruncationConfig()
    summary: SummaryConfig = SummaryConfig()
    window: WindowConfig = WindowConfig()
    guarantee: GuaranteeConfig = GuaranteeConfig()
    card: CardConfig = CardConfig()

    @classmethod
    def parse(cls, data: dict[str, Any], *, source: str = "policy") -> Policy:
        """Validate ``data`` into a policy, or raise ``ConfigError`` naming every bad key.

        ``base = "<preset>"`` starts from that preset and overrides the keys ``data`` gives
        (tables merge key by key; ``retention.tools`` entries are added to the preset's).
        """
        body = dict(data)
        base = body.pop("base", None)
        if base is not None:
            from contextledger.projections.presets import PRESETS  # noqa: PLC0415 - presets are Policies

            if not isinstance(base, str) or base not in PRESETS:
                known = ", ".join(PRESETS)
                raise ConfigError(f"invalid {source}: base: unknown preset {base!r} (use one of {known})")
            body = _merge(PRESETS[base].model_dump(exclude={"name", "description"}), body)
        try:
            return cls.model_validate(body)
        except pydantic.ValidationError as error:
            raise policy_error(error, source) from None

    def check_tools(self, known: Iterable[str], *, source: str = "policy") -> None:
        """Raise ``ConfigError`` if ``retention.tools`` names a tool that is not in ``known``.

        Args:
            known: The tool names of the session (its schemas and the tools it called).
            source: Where the policy came from, for the message.

        Raises:
            ConfigError: Naming each unknown key, the closest known name and the known tools.
        """
        names = sorted(set(known))
        problems = []
        for tool in sorted(set(self.retention.tools) - set(names)):
            close = difflib.get_close_matches(tool, names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            problems.append(f"retention.tools.{tool}: no tool of this name in the session{hint}")
        if problems:
            listed = ", ".join(names) or "none"
            message = "; ".join(problems)
            raise ConfigError(f"invalid {source}: {message} (the session's tools: {listed})")

    def fingerprint(self) -> str:
        """Return a stable text identifying the policy's content (for caches)."""
        return self.model_dump_json()


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def policy_error(error: pydantic.ValidationError, source: str) -> ConfigError:
    """Return a ``ConfigError`` listing each problem as ``key.path: message``."""
    problems = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "(top level)"
        if item["type"] == "extra_forbidden":
            problems.append(f"{where}: unknown key")
            continue
        message = item["msg"].removeprefix("Value error, ")
        key = _FIELD_MESSAGE.match(message)
        if key is not None:  # a value's own check names its field first (see Budget)
            problems.append(f"{where}.{message}")
            continue
        value = item.get("input")
        shown = "" if isinstance(value, dict) else f" (got {value!r})"
        problems.append(f"{where}: {message}{shown}")
    return ConfigError(f"invalid {source}: " + "; ".join(problems))
