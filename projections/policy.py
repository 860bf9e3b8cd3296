"""Render policies: a budget plus one config per reducer, as validated pydantic models."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Self

import msgspec
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


class _BudgetModel(pydantic.BaseModel):
    """What every configured budget does: forbid unknown keys, validate by ``Budget``, build one."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

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


def _budget_fields() -> dict[str, Any]:
    """The fields of ``Budget`` (names, types, defaults) as pydantic field definitions."""
    return {
        field.name: (field.type, ... if field.required else field.default)
        for field in msgspec.structs.fields(Budget)
    }


if TYPE_CHECKING:

    class BudgetConfig(_BudgetModel):
        """The budget as configured (its fields are ``Budget``'s)."""

        def __init__(self, **fields: Any) -> None:
            """Take ``Budget``'s fields as keywords."""

else:
    BudgetConfig = pydantic.create_model(
        "BudgetConfig",
        __base__=_BudgetModel,
        __module__=__name__,
        __doc__="The budget as configured: ``Budget``'s fields, validated by ``Budget`` alone; "
        "``build()`` returns the ``Budget`` value reducers receive.",
        **_budget_fields(),
    )


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
        (tables merge key by key; ``retention.tools`` entries are added to the preset's). Values are
        checked strictly, as JSON types: a text, a float or a boolean where an integer is asked is
        refused, never coerced (``total = "64000"`` in a file is a mistake to name, not 64,000); an
        integer still fills a float and an array a tuple.
        """
        body = dict(data)
        base = body.pop("base", None)
        if base is not None:
            from contextledger.projections.presets import PRESETS  # noqa: PLC0415 - presets are Policies

            if not isinstance(base, str) or base not in PRESETS:
                known = ", ".join(PRESETS)
                raise ConfigError(f"invalid {source}: base: unknown preset {base!r} (use one of {known})")
            body = _merge(PRESETS[base].model_dump(exclude={"name", "description"}), body)
        _check_plain(body, (), source)
        try:
            return cls.model_validate_json(json.dumps(body), strict=True)
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
        """Return a stable text identifying the policy's content (for caches, version names, call records).

        A field added after policies were recorded is left out while it holds its default
        (``_LATER_FIELDS``): a policy that does not use it keeps the fingerprint it had before the field.
        """
        left_out = {
            section: {name for name in names if getattr(getattr(self, section), name) == default}
            for section, names, default in _LATER_FIELDS
        }
        exclude = {section: names for section, names in left_out.items() if names}
        return self.model_dump_json(exclude=exclude or None)


_LATER_FIELDS: tuple[tuple[str, frozenset[str], object], ...] = (
    ("card", frozenset({"history_note", "history_as_of"}), False),
    ("window", frozenset({"head_cap_strict", "pin_whole_request"}), False),
    ("summary", frozenset({"clip_within_room", "latest_within_room", "exact_cover"}), False),
)
"""Fields added after policies were fingerprinted: (section, names, default), left out at the default."""

_PLAIN = (str, int, float, bool, type(None))


def _check_plain(value: object, where: tuple[str, ...], source: str) -> None:
    """Raise ``ConfigError`` naming the first value no policy field can take (a TOML date or time)."""
    if isinstance(value, dict):
        for key, item in value.items():
            _check_plain(item, (*where, str(key)), source)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check_plain(item, (*where, str(index)), source)
    elif not isinstance(value, _PLAIN):
        path = ".".join(where) or "(top level)"
        kind = type(value).__name__
        raise ConfigError(f"invalid {source}: {path}: a {kind} is not a valid value here (got {value!r})")


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
