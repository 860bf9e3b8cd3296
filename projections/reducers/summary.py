"""Summary application: the latest applicable artifact (or clip-archive batches) replaces what it covers."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
import pydantic
from contextledger.projections.budget import Budget
from contextledger.projections.groups import pin_reason, remove_groups
from contextledger.projections.state import Removed, RenderState, SummaryRef, WorkingContext

__all__ = ["SummaryConfig", "SummaryReducer", "select_summaries", "shown_room", "summary_room"]


class SummaryConfig(pydantic.BaseModel):
    """How summary artifacts (``SummaryRecorded``, produced elsewhere) enter the context.

    Attributes:
        enabled: Use summaries at all.
        mode: ``latest`` shows the one artifact reaching furthest (seed 001 "latest applicable
            summary + verbatim tail"); ``clip`` shows the first and last batches (seed 003).
        clip_first: Batches shown from the start in ``clip`` mode.
        clip_last: Batches shown from the end in ``clip`` mode.
        max_tokens: Artifacts larger than this are not used (seed 002 ``max_summary_tokens``).
        on_arrival: Apply a new artifact as soon as it is available (itself a compaction point,
            a single prefix change); otherwise wait for the next compaction point.
        clip_within_room: In ``clip`` mode, show only as many of the first and last batches as fit the
            room the pinned parts of the context leave under the target, leaving out the middle-most
            first (their spans stay searchable: ``recall``). Off (as policies recorded before ADR 0094
            were), the batches were bounded one by one, and together they could pin more than the budget.
        latest_within_room: In ``latest`` mode, show the artifact reaching furthest among those that fit
            the same room, none when none does (ADR 0095). Off (as policies recorded before it were), a
            summary larger than that room was shown all the same, and every later render of the session
            failed with ``PinnedOverBudgetError`` where the events without it fit.
        exact_cover: What the summaries shown stand for is exactly what the window leaves out as
            summarized (ADR 0097): when none is shown any more (no room) or one gives way to a summary
            starting later, those records become ``dropped``; a group pinned when a summary was applied
            leaves, as summarized, at the first compaction point after its pin lifts. Off (as policies
            recorded before it were), such groups kept ``summarized`` records though no summary was shown,
            or stayed verbatim inside the span of the summary shown.
    """

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    mode: Literal["latest", "clip"] = "latest"
    clip_first: Annotated[int, pydantic.Field(ge=0)] = 2
    clip_last: Annotated[int, pydantic.Field(gt=0)] = 2
    max_tokens: Annotated[int, pydantic.Field(gt=0)] | None = None
    on_arrival: bool = True
    clip_within_room: bool = False
    latest_within_room: bool = False
    exact_cover: bool = False

    @property
    def within_room(self) -> bool:
        """Whether the summaries shown are bounded by the room the pinned parts leave (``summary_room``)."""
        return self.clip_within_room if self.mode == "clip" else self.latest_within_room

    def fits(self, summary: SummaryRef, budget: Budget) -> bool:
        """Return whether an artifact is small enough to be shown."""
        limit = (
            budget.message_tokens if self.max_tokens is None else min(self.max_tokens, budget.message_tokens)
        )
        return summary.tokens <= limit


def summary_room(state: RenderState, budget: Budget, *, card: bool = True) -> int:
    """Tokens the summaries may take: the target less everything no reducer can evict.

    The system prompt, the tools, the card and every pinned group stay, and so does the newest group
    (the guarantee leaves it last); summaries that took more would make the render fail. With ``card``
    False the card's tokens are left in the room: refreshed after the reducers within what is left under
    the target, it yields to a summary (``latest`` mode, ADR 0095).
    """
    groups = state.window.groups
    kept = sum(
        g.tokens for i, g in enumerate(groups) if i == len(groups) - 1 or pin_reason(g, state) is not None
    )
    cards = state.window.card_tokens if card else 0
    return budget.target - state.system_tokens - state.tools_tokens - cards - kept


def shown_room(config: SummaryConfig, state: RenderState, budget: Budget) -> int | None:
    """The room bounding the summaries ``config`` shows (``summary_room``), or None when none does."""
    if not config.within_room:
        return None
    return summary_room(state, budget, card=config.mode == "clip")


def select_summaries(
    config: SummaryConfig, available: list[SummaryRef], head_end: int, room: int | None = None
) -> tuple[SummaryRef, ...]:
    """Return the artifacts to show, oldest span first, given those available (in arrival order).

    ``room`` (``summary_room``, with ``within_room``): clip batches are left out, the middle-most first,
    until those shown fit in it; in ``latest`` mode only an artifact that fits in it may be shown.
    """
    useful = [s for s in available if s.covers_through > head_end]
    if config.mode == "latest" and room is not None:
        useful = [s for s in useful if s.tokens <= room]
    if not useful:
        return ()
    if config.mode == "latest":
        best = useful[0]
        for summary in useful[1:]:
            if summary.covers_through >= best.covers_through:
                best = summary
        return (best,)
    outer = [
        s
        for s in useful
        if not any(
            o is not s
            and o.covers_from <= s.covers_from
            and s.covers_through <= o.covers_through
            and (o.covers_from, o.covers_through) != (s.covers_from, s.covers_through)
            for o in useful
        )
    ]  # a deeper batch stands for the batches inside its span (seed 003's re-summarization)
    batches = sorted(outer, key=lambda s: (s.covers_from, s.covers_through, s.summary_id))
    if len(batches) <= config.clip_first + config.clip_last:
        first, last = batches[: config.clip_first], batches[config.clip_first :]
    else:
        first, last = batches[: config.clip_first], batches[len(batches) - config.clip_last :]
    while room is not None and first + last and sum(s.tokens for s in first + last) > room:
        if len(first) >= len(last):  # the middle-most: the latest of the first, or the earliest of the last
            first = first[:-1]
        else:
            last = last[1:]
    return (*first, *last)


class SummaryReducer:
    """Shows the selected artifacts as summary blocks at the front and removes the groups they cover.

    A group is covered when all its positions are at or before the furthest position shown; pinned
    groups stay. Applying a summary is a compaction point: one prefix change, not one per turn.
    """

    name = "summary"

    def __init__(self, config: SummaryConfig) -> None:
        """Apply ``config``."""
        self.config = config

    def reduce(
        self, context: WorkingContext, budget: Budget, state: RenderState
    ) -> tuple[WorkingContext, RenderState]:
        """Swap in the selected summaries; return the window and state."""
        if not self.config.enabled:
            return context, state
        room = shown_room(self.config, state, budget)
        chosen = select_summaries(self.config, state.available, state.head_end, room)
        if not chosen and room is not None and context.summaries:  # none fits any more: none is shown
            _withdraw(context, exact=self.config.exact_cover and self.config.mode == "latest")
            return context, state
        if not chosen:
            return context, state
        if chosen == context.summaries:
            if self.config.exact_cover:  # a group pinned when it was applied (the latest request) may be
                _take_out(context, state, chosen)  # unpinned now: the summary stands for it
            return context, state
        old = context.summaries
        if self.config.mode == "latest" and old and chosen[0].covers_through < old[0].covers_through:
            _uncover(context, chosen[0].covers_through, old[0].covers_through)  # fell back to a smaller one
        if self.config.mode == "latest" and old and old[0].covers_from < chosen[0].covers_from:
            lost_last = min(chosen[0].covers_from - 1, old[0].covers_through)
            if self.config.exact_cover:  # what only the old one stood for is shown by none now
                _relabel(context, old[0].covers_from, lost_last, "summary:superseded")
            context.removed.append(
                Removed(
                    first=old[0].covers_from,
                    last=lost_last,
                    action="dropped",
                    rule="summary:superseded",
                    messages=0,
                    tokens=0,
                )
            )
        context.tokens += sum(s.tokens for s in chosen) - sum(s.tokens for s in old)
        context.summaries = chosen
        _take_out(context, state, chosen)
        return context, state


def _withdraw(context: WorkingContext, *, exact: bool) -> None:
    """Show no summary any more (none fits the room): its span is named dropped by ``summary:no-room``.

    With ``exact`` (``SummaryConfig.exact_cover``), the groups' ``summarized`` records are relabelled too.
    """
    if exact:  # no summary is shown: nothing is summarized any more
        reach = max((r.last for r in context.removed if r.rule == "summary"), default=0)
        _relabel(context, 1, reach, "summary:no-room")
    for summary in context.summaries:
        context.removed.append(
            Removed(
                first=summary.covers_from,
                last=summary.covers_through,
                action="dropped",
                rule="summary:no-room",
                messages=0,
                tokens=0,
            )
        )
    context.tokens -= sum(s.tokens for s in context.summaries)
    context.summaries = ()


def _take_out(context: WorkingContext, state: RenderState, shown: tuple[SummaryRef, ...]) -> None:
    """Remove, as summarized, every unpinned group within the reach of the summaries ``shown``."""
    through = max(s.covers_through for s in shown)
    doomed = [
        i
        for i, group in enumerate(context.groups)
        if max(e.position for e in group.entries) <= through and pin_reason(group, state) is None
    ]
    remove_groups(context, doomed, "summarized", "summary")


def _uncover(context: WorkingContext, through: int, old_through: int) -> None:
    """Name as dropped for want of room what a summary no longer shown covered past ``through``.

    A summary that stops fitting the room gives way to an older, smaller one (``latest_within_room``); the
    groups the first one took out stay out, and their ``summarized`` records would claim a summary that no
    call shows. Those past ``through`` become ``dropped`` by ``summary:no-room``.
    """
    _relabel(context, through + 1, old_through, "summary:no-room")


def _relabel(context: WorkingContext, first: int, last: int, rule: str) -> None:
    """Turn the ``summarized`` records of ``first..last`` into ``dropped`` by ``rule``.

    The groups are gone, so a record reaching past either end is split there, its counts shared by
    positions (the part before ``first`` rounded first, then the part after ``last``).
    """
    out: list[Removed] = []
    for removed in context.removed:
        if removed.rule != "summary" or removed.last < first or removed.first > last:
            out.append(removed)
            continue
        span = removed.last - removed.first + 1
        before = max(0, first - removed.first)
        after = max(0, removed.last - last)
        messages_before, tokens_before = (
            round(removed.messages * before / span),
            round(removed.tokens * before / span),
        )
        messages_after, tokens_after = (
            round(removed.messages * after / span),
            round(removed.tokens * after / span),
        )
        if before:
            out.append(
                msgspec.structs.replace(
                    removed, last=first - 1, messages=messages_before, tokens=tokens_before
                )
            )
        out.append(
            Removed(
                first=max(first, removed.first),
                last=min(last, removed.last),
                action="dropped",
                rule=rule,
                messages=removed.messages - messages_before - messages_after,
                tokens=removed.tokens - tokens_before - tokens_after,
            )
        )
        if after:
            out.append(
                msgspec.structs.replace(removed, first=last + 1, messages=messages_after, tokens=tokens_after)
            )
    context.removed = out
