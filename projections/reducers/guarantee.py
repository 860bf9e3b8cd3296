"""The hard guarantee: tier caps, evict down to the low-water mark, never above the target."""

from __future__ import annotations

import pydantic
from contextledger.domain.ports import TokenCounter
from contextledger.projections.budget import Budget
from contextledger.projections.context import MESSAGE_OVERHEAD
from contextledger.projections.groups import pin_reason, remove_groups, stub_results, stub_text
from contextledger.projections.reducers.retention import RetentionConfig
from contextledger.projections.state import RenderState, WorkingContext

__all__ = ["GuaranteeConfig", "GuaranteeReducer"]


class GuaranteeConfig(pydantic.BaseModel):
    """The last stage of compaction.

    Attributes:
        protect_newest: While evicting down to the low-water mark, keep the newest group (the step
            the model just took); it is only stubbed or dropped if the target itself is at stake.
    """

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    protect_newest: bool = True


class GuaranteeReducer:
    """Brings the window within its tier caps and down to the low-water mark, then under the target.

    Order: (1) if tool results exceed their tier cap, stub the oldest ones down to the cap scaled by
    the water marks; (2) if this compaction fired on the total, drop the oldest unpinned whole groups
    down to the low-water mark; (3) if still above the target, stub the newest group's results, then
    drop it. Whatever remains above the target is pinned: rendering raises ``PinnedOverBudgetError``.
    """

    name = "guarantee"

    def __init__(self, config: GuaranteeConfig, retention: RetentionConfig, counter: TokenCounter) -> None:
        """Apply ``config``; ``retention`` says which tools are never stubbed."""
        self.config = config
        self.retention = retention
        self.counter = counter

    def reduce(
        self, context: WorkingContext, budget: Budget, state: RenderState
    ) -> tuple[WorkingContext, RenderState]:
        """Evict as described in the class docstring; return the window and state."""
        self._tier(context, budget, state)
        fixed = state.system_tokens + state.tools_tokens
        if state.reason == "tokens":
            goal = budget.low_mark - fixed
            self._drop_oldest(context, goal, state, keep_newest=self.config.protect_newest, rule="low-water")
        if fixed + context.tokens > budget.target:
            self._drop_oldest(context, budget.target - fixed, state, keep_newest=True, rule="guarantee")
        if fixed + context.tokens > budget.target and context.groups:
            newest = len(context.groups) - 1
            if pin_reason(context.groups[newest], state) is None:
                targets = [
                    (newest, ei, "guarantee")
                    for ei, entry in enumerate(context.groups[newest].entries)
                    if entry.is_result and entry.kind != "stub"
                ]
                stub_results(
                    context, targets, self.counter, state.pending_tokens, verb="result removed to fit"
                )
                if fixed + context.tokens > budget.target:
                    remove_groups(context, [newest], "dropped", "guarantee")
        return context, state

    def _tier(self, context: WorkingContext, budget: Budget, state: RenderState) -> None:
        cap, low = budget.tool_cap, budget.tool_low
        if cap is None or low is None or context.tool_tokens <= cap:
            return
        excess = context.tool_tokens - low
        targets: list[tuple[int, int, str]] = []
        for gi, group in enumerate(context.groups):
            if excess <= 0:
                break
            if pin_reason(group, state) is not None:
                continue
            for ei, entry in enumerate(group.entries):
                if not entry.is_result or entry.kind == "stub":
                    continue
                if self.retention.rule_for(entry.tool_name or "").never_evict:
                    continue
                saving = entry.tokens - self.counter.count(stub_text(entry)) - MESSAGE_OVERHEAD
                if saving <= 0:
                    continue
                targets.append((gi, ei, "tier:tool_results"))
                excess -= saving
                if excess <= 0:
                    break
        stub_results(context, targets, self.counter, state.pending_tokens)

    @staticmethod
    def _drop_oldest(
        context: WorkingContext, goal: int, state: RenderState, *, keep_newest: bool, rule: str
    ) -> None:
        excess = context.tokens - goal
        if excess <= 0:
            return
        last = len(context.groups) - 1
        doomed: list[int] = []
        for i, group in enumerate(context.groups):
            if excess <= 0:
                break
            if (keep_newest and i == last) or pin_reason(group, state) is not None:
                continue
            doomed.append(i)
            excess -= group.tokens
        remove_groups(context, doomed, "dropped", rule)
