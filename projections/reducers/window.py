"""Sliding window over the dialogue: keep_first head, recent-window caps and a turn scope."""

from __future__ import annotations

from typing import Annotated, Literal

import pydantic
from contextledger.projections.budget import Budget
from contextledger.projections.groups import pin_reason, remove_groups
from contextledger.projections.state import Group, RenderState, WorkingContext

__all__ = ["WindowConfig", "WindowReducer"]

Unit = Literal["turns", "steps"]
RecentUnit = Literal["turns", "steps", "messages", "tokens"]


class WindowConfig(pydantic.BaseModel):
    """The dialogue window (seeds 001, 002, 004).

    Attributes:
        keep_first: How many leading units of the session stay pinned verbatim (the head, seed 002
            ``keep_first``), within the budget's ``head_cap``.
        keep_first_unit: ``turns`` (user turns) or ``steps`` (assistant steps).
        keep_recent: At a compaction point, keep only this many recent units (None: no cap).
        keep_recent_unit: ``turns``, ``steps``, ``messages`` (whole groups, pair-safe) or ``tokens``.
        scope_turns: At a compaction point, drop groups of user turns older than this many earlier
            turns (seed 002 ``FixedCount``); they live on only through a summary that covers them.
        head_cap_strict: A step group whose tool results take the head past ``head_cap`` leaves the
            head, and so do the head groups after it: they may be cut like any other group. Off (as
            policies recorded before ADR 0092 were), such a group stayed pinned with all its results,
            so large parallel results in the first step could pin more than the budget for good.
        pin_whole_request: Every user message since the assistant's last reply is the current request and
            stays pinned like the latest one (ADR 0096). Off (as policies recorded before it were), only
            the latest message was pinned: a spec sent, then "implement it", lost the spec at the next
            compaction.
    """

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    keep_first: Annotated[int, pydantic.Field(ge=0)] = 1
    keep_first_unit: Unit = "turns"
    keep_recent: Annotated[int, pydantic.Field(gt=0)] | None = None
    keep_recent_unit: RecentUnit = "turns"
    scope_turns: Annotated[int, pydantic.Field(ge=0)] | None = None
    head_cap_strict: bool = False
    pin_whole_request: bool = False

    def in_head(self, turn: int, step: int) -> bool:
        """Return whether a group starting at ``turn``/``step`` belongs to the keep_first head."""
        if self.keep_first == 0:
            return False
        return (turn if self.keep_first_unit == "turns" else step) <= self.keep_first


class WindowReducer:
    """At a compaction point, drops unpinned whole groups beyond the recent-window caps and the scope."""

    name = "window"

    def __init__(self, config: WindowConfig) -> None:
        """Apply ``config``."""
        self.config = config

    def reduce(
        self, context: WorkingContext, budget: Budget, state: RenderState
    ) -> tuple[WorkingContext, RenderState]:
        """Remove the groups outside the window; the newest group always stays."""
        del budget
        config = self.config
        if config.keep_recent is None and config.scope_turns is None:
            return context, state
        doomed: list[int] = []
        used = 0
        outside = False
        last = len(context.groups) - 1
        for i in range(last, -1, -1):
            group = context.groups[i]
            if not outside and config.keep_recent is not None:
                outside, used = self._beyond(group, state, used, newest=i == last)
            out_of_scope = config.scope_turns is not None and state.turns - group.turn > config.scope_turns
            if (outside or out_of_scope) and i != last and pin_reason(group, state) is None:
                doomed.append(i)
        rule = f"window:{config.keep_recent_unit}" if config.keep_recent is not None else "window:scope"
        remove_groups(context, doomed, "dropped", rule)
        return context, state

    def _beyond(self, group: Group, state: RenderState, used: int, *, newest: bool) -> tuple[bool, int]:
        """Return whether ``group`` falls outside the recent window, and the units used so far."""
        limit = self.config.keep_recent
        assert limit is not None  # noqa: S101 - checked by the caller
        unit = self.config.keep_recent_unit
        if unit == "turns":
            return state.turns - group.turn >= limit, used
        if unit == "steps":
            return state.steps - group.step >= limit, used
        if unit == "messages":
            # The group crossing the cap stays whole (pair-safe), like seed 004's boundary walk.
            return used >= limit, used + group.messages
        total = used + group.tokens
        return (total > limit and not newest), total
