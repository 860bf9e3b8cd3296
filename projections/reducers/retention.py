"""Tool-result retention: age- and count-based expiry per tool; expired results are stubbed, never dropped."""

from __future__ import annotations

from typing import Annotated, Any

import pydantic
from contextledger.domain.ports import TokenCounter
from contextledger.projections.budget import Budget
from contextledger.projections.groups import pin_reason, replace_entries, stub_results
from contextledger.projections.media import evict_media
from contextledger.projections.state import RenderState, WorkingContext

__all__ = ["RetentionConfig", "RetentionReducer", "ToolRetention"]

_Positive = Annotated[int, pydantic.Field(gt=0)]


class ToolRetention(pydantic.BaseModel):
    """How long one tool's results stay whole (seed 001).

    Attributes:
        keep_turns: Age-based: a result expires once this many user turns began since its call.
        keep_steps: Age-based: a result expires once this many assistant steps followed its call.
        keep_last: Count-based: only the last N results of this tool stay whole.
        never_evict: The tool's results are durable facts: never stubbed.
    """

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    keep_turns: _Positive | None = None
    keep_steps: _Positive | None = None
    keep_last: _Positive | None = None
    never_evict: bool = False


class RetentionConfig(pydantic.BaseModel):
    """Retention rules: a global default plus per-tool overrides (a tool's fields replace the default's)."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    default: ToolRetention = ToolRetention()
    tools: dict[str, ToolRetention] = pydantic.Field(default_factory=dict)
    media: ToolRetention = ToolRetention()
    """How long the image and file parts of user messages stay: ``keep_turns`` (user turns since
    the message) and ``keep_last`` (the last N messages with parts); expired parts become stubs
    (``projections.media.media_stub``) and the message's text stays."""

    @pydantic.model_serializer(mode="wrap")
    def _without_default_media(self, handler: pydantic.SerializerFunctionWrapHandler) -> Any:
        """Leave ``media`` out while it is the default, so policies written before it keep their hash."""
        data = handler(self)
        if isinstance(data, dict) and self.media == ToolRetention():
            data.pop("media", None)
        return data

    def rule_for(self, tool: str) -> ToolRetention:
        """Return the effective rule of ``tool``: its override merged over the default."""
        override = self.tools.get(tool)
        if override is None:
            return self.default
        merged = self.default.model_dump() | override.model_dump(exclude_unset=True)
        return ToolRetention.model_validate(merged)


class RetentionReducer:
    """At a compaction point, stubs every result its tool's rule has expired, in one batch.

    Batching matters: stubbing one more result per call breaks the cached prefix on almost every
    call (1.87x the cost of sending everything on the peers' measurements).
    """

    name = "retention"

    def __init__(self, config: RetentionConfig, counter: TokenCounter) -> None:
        """Apply ``config``; stubs are counted through ``counter``."""
        self.config = config
        self.counter = counter
        self._rules: dict[str, ToolRetention] = {}

    def _rule(self, tool: str) -> ToolRetention:
        rule = self._rules.get(tool)
        if rule is None:
            rule = self._rules[tool] = self.config.rule_for(tool)
        return rule

    def reduce(
        self, context: WorkingContext, budget: Budget, state: RenderState
    ) -> tuple[WorkingContext, RenderState]:
        """Stub expired results outside pinned groups, and expired or over-cap media; return both."""
        self._evict_media(context, state, budget.message_tokens)
        if not self.config.enabled:
            return context, state
        targets: list[tuple[int, int, str]] = []
        newer: dict[str, int] = {}
        for gi in range(len(context.groups) - 1, -1, -1):
            group = context.groups[gi]
            pinned = pin_reason(group, state) is not None
            for ei in range(len(group.entries) - 1, -1, -1):
                entry = group.entries[ei]
                if not entry.is_result:
                    continue
                tool = entry.tool_name or ""
                seen = newer.get(tool, 0)
                newer[tool] = seen + 1
                if pinned or entry.kind == "stub":
                    continue
                expired = self._expired(tool, seen, state.turns - group.turn, state.steps - group.step)
                if expired is not None:
                    targets.append((gi, ei, expired))
        targets.reverse()
        stub_results(context, targets, self.counter, state.pending_tokens)
        return context, state

    def _evict_media(self, context: WorkingContext, state: RenderState, cap: int) -> None:
        """Stub the media parts the ``media`` rule has expired and those over the per-message cap.

        Pinned groups keep theirs from the rule, not from the cap (the cap cuts any message).
        """
        rule = self.config.media
        aging = self.config.enabled and not rule.never_evict
        newer = 0
        for gi in range(len(context.groups) - 1, -1, -1):
            group = context.groups[gi]
            if not group.is_user or not group.entries[0].media:
                continue
            newer += 1
            expired = aging and (
                (rule.keep_last is not None and newer > rule.keep_last)
                or (rule.keep_turns is not None and state.turns - group.turn >= rule.keep_turns)
            )
            if group.entries[0].tokens > cap:
                reason = "cap:media"
            elif expired and pin_reason(group, state) is None:
                reason = "retention:media"
            else:
                continue
            entry = evict_media(group.entries[0], self.counter, reason)
            replace_entries(context, gi, (entry, *group.entries[1:]), state.pending_tokens)

    def _expired(self, tool: str, newer: int, turn_age: int, step_age: int) -> str | None:
        rule = self._rule(tool)
        if rule.never_evict:
            return None
        if rule.keep_last is not None and newer >= rule.keep_last:
            return "retention:count"
        if rule.keep_turns is not None and turn_age >= rule.keep_turns:
            return "retention:turns"
        if rule.keep_steps is not None and step_age >= rule.keep_steps:
            return "retention:steps"
        return None
