"""Render policies: a budget plus one config per reducer, as validated pydantic models."""

from __future__ import annotations

from typing import Annotated, Any, Self

import pydantic
from contextledger.domain.errors import ConfigError
from contextledger.projections.budget import Budget
from contextledger.projections.reducers.guarantee import GuaranteeConfig
from contextledger.projections.reducers.retention import RetentionConfig
from contextledger.projections.reducers.summary import SummaryConfig
from contextledger.projections.reducers.truncation import TruncationConfig
from contextledger.projections.reducers.window import WindowConfig

__all__ = ["BudgetConfig", "Policy", "policy_error"]

_Fraction = Annotated[float, pydantic.Field(gt=0, le=1)]
_Tokens = Annotated[int, pydantic.Field(ge=0)]


class BudgetConfig(pydantic.BaseModel):
    """The budget as configured; ``build()`` turns it into the ``Budget`` value reducers receive.

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
    """

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    total: Annotated[int, pydantic.Field(gt=0)] = 128_000
    output_reserve: _Tokens = 4_000
    injection_reserve: _Tokens = 0
    safety_margin: _Tokens = 0
    high_water: _Fraction = 0.9
    low_water: _Fraction = 0.6
    headroom: _Tokens | None = None
    tool_results_cap: _Fraction | None = None
    head_cap: _Fraction = 0.15
    message_cap: _Fraction = 0.25

    @pydantic.model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.low_water > self.high_water:
            msg = f"low_water ({self.low_water}) must not be above high_water ({self.high_water})"
            raise ValueError(msg)
        spare = self.total - self.output_reserve - self.safety_margin - self.injection_reserve
        if spare <= 0:
            msg = (
                f"total ({self.total}) leaves no prompt room after output_reserve, safety_margin and "
                "injection_reserve"
            )
            raise ValueError(msg)
        return self

    def build(self) -> Budget:
        """Return the ``Budget`` value."""
        return Budget(**self.model_dump())


class Policy(pydantic.BaseModel):
    """A complete render policy: one budget and the config of each reducer, in pipeline order.

    Pipeline (cheap to expensive, at compaction points only): retention → truncation → summary →
    window → guarantee. Load one from TOML with ``contextledger.adapters.policy_files``.
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

    @classmethod
    def parse(cls, data: dict[str, Any], *, source: str = "policy") -> Policy:
        """Validate ``data`` into a policy, or raise ``ConfigError`` naming every bad key."""
        try:
            return cls.model_validate(data)
        except pydantic.ValidationError as error:
            raise policy_error(error, source) from None

    def fingerprint(self) -> str:
        """Return a stable text identifying the policy's content (for caches)."""
        return self.model_dump_json()


def policy_error(error: pydantic.ValidationError, source: str) -> ConfigError:
    """Return a ``ConfigError`` listing each problem as ``key.path: message``."""
    problems = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "(top level)"
        if item["type"] == "extra_forbidden":
            problems.append(f"{where}: unknown key")
        else:
            message = item["msg"].removeprefix("Value error, ")
            value = item.get("input")
            shown = "" if isinstance(value, dict) else f" (got {value!r})"
            problems.append(f"{where}: {message}{shown}")
    return ConfigError(f"invalid {source}: " + "; ".join(problems))
