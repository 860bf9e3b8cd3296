"""A render's decisions: what happened to every logged position, as short ranges, and evictions by rule."""

from __future__ import annotations

import bisect
import heapq
import itertools
import math

import msgspec
from contextledger.projections.context import SHOWN_AS_SUMMARY, Decision, DecisionAction
from contextledger.projections.groups import pin_reason
from contextledger.projections.state import Group, Removed, RenderState, SummaryRef, WorkingContext
from contextledger.projections.wire import REQUEST_OVERHEAD

__all__ = ["decisions", "eviction_counts"]

_RANK: dict[str, int] = {"kept": 0, "truncated": 1, "stubbed": 2}


def _group_action(group: Group, pinned: str | None) -> tuple[DecisionAction, str, int, int]:
    """Return a group's action and rule, how many of its messages were changed, and its tokens."""
    action: DecisionAction = "kept"
    rule = "verbatim"
    changed = 0
    for entry in group.entries:
        if entry.kind in ("stub", "truncated"):
            changed += 1
            candidate: DecisionAction = "stubbed" if entry.kind == "stub" else "truncated"
            if _RANK[candidate] > _RANK[action]:
                action, rule = candidate, entry.rule
    if pinned is not None:
        action, rule = "pinned", pinned
    return action, rule, changed, group.tokens


_Range = tuple[int, int, DecisionAction, str, "Removed | SummaryRef | list[_Item] | None"]
"""A decision before its detail is written: first, last, action, rule, and what the detail is made of."""
_Item = tuple[Group, DecisionAction, str, int, int]
"""A shown group with its action, rule, messages changed and tokens (``_group_action``)."""


def _ranges(state: RenderState) -> list[_Range]:
    """The decisions of ``decisions`` without their details, in the same order."""
    out: list[_Range] = [(1, 1, "pinned", "system", None)] if state.system else []
    out += _left_out(state.window)
    items = [(g, *_group_action(g, pin_reason(g, state))) for g in state.window.groups]
    _absorb_kept(items)
    gaps = sorted((r[0], r[1]) for r in out if r[4] is not None)  # what no shown group holds
    run: list[_Item] = []
    for item in items:
        if run and (run[-1][1], run[-1][2]) != (item[1], item[2]):
            out += _run_ranges(run, gaps)
            run = []
        run.append(item)
    if run:
        out += _run_ranges(run, gaps)
    out.sort(key=lambda r: (r[0], r[1]))
    return out


def _run_ranges(run: list[_Item], gaps: list[tuple[int, int]]) -> list[_Range]:
    """A run's range, cut where a range left out lies between its positions (a late result's step group).

    A step group whose result came after groups that were then dropped spans them: its one range read
    ``242-269 kept`` beside ``243-250 dropped``. Each part's detail counts the messages it holds.
    """
    whole = _run_range(run)
    if not _left_between(gaps, whole[0], whole[1]):
        return [whole]
    positions = sorted(e.position for item in run for e in item[0].entries)
    cuts = [b for a, b in itertools.pairwise(positions) if _left_between(gaps, a, b)]
    return [
        _run_range(_part(run, low, high))
        for low, high in zip([positions[0], *cuts], [*cuts, positions[-1] + 1], strict=True)
    ]


def _left_between(gaps: list[tuple[int, int]], low: int, high: int) -> bool:
    """Whether a range left out (``gaps``, sorted) lies strictly between positions ``low`` and ``high``."""
    index = bisect.bisect_right(gaps, (low, math.inf))
    while index < len(gaps) and gaps[index][0] < high:
        if gaps[index][1] < high:
            return True
        index += 1
    return False


def _part(run: list[_Item], low: int, high: int) -> list[_Item]:
    """The items of ``run`` holding positions ``low..high-1``, each group cut to its entries there."""
    items: list[_Item] = []
    for group, action, rule, changed, tokens in run:
        entries = tuple(e for e in group.entries if low <= e.position < high)
        if len(entries) == len(group.entries):
            items.append((group, action, rule, changed, tokens))
        elif entries:
            placeholders = (
                group.tokens - sum(e.tokens for e in group.entries) if entries[0] is group.entries[0] else 0
            )
            part = msgspec.structs.replace(
                group,
                entries=entries,
                pending=group.pending if placeholders else (),
                tokens=sum(e.tokens for e in entries) + placeholders,
            )
            cut = sum(e.kind in ("stub", "truncated") for e in entries)
            items.append((part, action, rule, cut, part.tokens))
    return items


def _left_out(window: WorkingContext) -> list[_Range]:
    """The ranges of the events out of the shown groups: removed ranges, then summaries' spans (unsorted)."""
    out: list[_Range] = [(r.first, r.last, r.action, r.rule, r) for r in window.removed]
    out += [(s.covers_from, s.covers_through, "summarized", "summary", s) for s in window.summaries]
    return out


def decisions(state: RenderState) -> tuple[Decision, ...]:
    """Return what happened to every logged position, as short ranges sorted by position.

    Shown groups are described whole (a step group whose result was stubbed is ``stubbed``; the
    messages' ``kind`` says which one), and consecutive groups with the same action and rule merge.
    """
    return tuple(
        Decision(first=first, last=last, action=action, rule=rule, detail=_detail(state, action, source))
        for first, last, action, rule, source in _ranges(state)
    )


def eviction_counts(state: RenderState, evicting: frozenset[str]) -> dict[str, int]:
    """Events taken out, by rule: each logged position counted once, by the fate the render gives it.

    ``evicting`` is a subset of the actions that take an event out (stubbed, truncated, summarized, dropped).

    The positions an ``evicting`` decision covers, less those a message shows whole: a stubbed or
    truncated message counts under its own entry's rule; every other position under the range that
    covers it, a summary's span before a dropped range (as ``dispositions_of`` ranks them). So nested
    or overlapping ranges (a step group whose late result spans a dropped run of groups, the groups a
    summary covers) and the verbatim calls of a stubbed group are never counted twice or at all. In
    the order of each rule's first counted position.
    """
    window = state.window
    shown: list[int] = []
    fates: dict[int, tuple[str, str]] = {}  # shown positions changed by a rule: (action, rule)
    for group in window.groups:
        for entry in group.entries:
            shown.append(entry.position)
            if entry.kind in _CHANGED:
                action = "stubbed" if entry.kind == "stub" else "truncated"
                if action in evicting:
                    fates[entry.position] = (action, entry.rule or action)
    shown.sort()
    ranges = _left_out(window)
    if not fates and not any(r[2] in evicting for r in ranges):
        return {}
    counts, firsts = _range_counts(ranges, shown, evicting)
    for position, (_, rule) in fates.items():
        counts[rule] = counts.get(rule, 0) + 1
        firsts[rule] = min(firsts.get(rule, position), position)
    return {rule: counts[rule] for rule in sorted(counts, key=lambda r: (firsts[r], r))}


def _range_counts(
    ranges: list[_Range], shown: list[int], evicting: frozenset[str]
) -> tuple[dict[str, int], dict[str, int]]:
    """Positions out of the window by the rule of the best range covering each, less ``shown`` (sorted).

    One sweep over the ranges' boundaries, the covering ranges in a heap (best rank, then first, then last
    on top, as ``dispositions_of`` picks): O(ranges log ranges). Returns the counts and each rule's first
    position counted.
    """
    ranges = sorted(ranges, key=lambda r: (r[0], r[1]))
    cuts = sorted({max(2, c) for r in ranges for c in (r[0], r[1] + 1)})  # position 1 starts the session
    firsts: dict[str, int] = {}
    counts: dict[str, int] = {}
    covering: list[tuple[int, int, int, int]] = []  # (rank, first, last, index): the owner on top
    entered = 0
    for low, high in itertools.pairwise(cuts):  # segment low..high-1 lies in or out of each range whole
        while entered < len(ranges) and ranges[entered][0] <= low:
            first, last, action = ranges[entered][:3]
            heapq.heappush(covering, (_RANGE_RANK.get(action, 2), first, last, entered))
            entered += 1
        while covering and covering[0][2] < low:  # ended before this segment: never covers another
            heapq.heappop(covering)
        if not covering or (owner := ranges[covering[0][3]])[2] not in evicting:
            continue
        hidden = high - low - (bisect.bisect_left(shown, high) - bisect.bisect_left(shown, low))
        if hidden:
            rule = owner[3]
            counts[rule] = counts.get(rule, 0) + hidden
            firsts[rule] = min(firsts.get(rule, low), low)
    return counts, firsts


_RANGE_RANK = {"summarized": 0, "dropped": 1}
"""Which range's rule an event out of the window counts under when ranges overlap (``dispositions_of``)."""


_CHANGED = frozenset({"stub", "truncated"})
"""Entry kinds that make a shown group's decision ``stubbed`` or ``truncated`` (``_group_action``)."""


def _detail(
    state: RenderState, action: DecisionAction, source: Removed | SummaryRef | list[_Item] | None
) -> str:
    if source is None:
        return f"{state.system_tokens:,} tokens with {REQUEST_OVERHEAD} of request framing"
    if isinstance(source, Removed):
        return _size(source.messages, source.tokens) if source.messages else ""
    if isinstance(source, SummaryRef):
        return SHOWN_AS_SUMMARY.format(summary_id=source.summary_id, tokens=source.tokens)
    messages = changed = tokens = 0
    for group, _, _, group_changed, group_tokens in source:
        messages += group.messages
        changed += group_changed
        tokens += group_tokens
    detail = _size(messages, tokens)
    if changed and action != "kept":
        detail += f"; {changed} {'stubbed or truncated' if action == 'pinned' else action}"
    return detail


def _absorb_kept(items: list[_Item]) -> None:
    """Relabel kept groups lying between two groups of the same stub/truncation rule, so ranges stay few.

    A compaction stubs the results of a span of steps, but results smaller than their stub stay
    as they are; without this the span would alternate kept/stubbed ranges.
    """
    last_changed: int | None = None
    for i, (group, action, rule, changed, tokens) in enumerate(items):
        if action in ("stubbed", "truncated"):
            if last_changed is not None and items[last_changed][1:3] == (action, rule):
                for j in range(last_changed + 1, i):
                    kept = items[j]
                    items[j] = (kept[0], action, rule, kept[3], kept[4])
            last_changed = i
        elif action != "kept":
            last_changed = None
        del group, changed, tokens


def _size(messages: int, tokens: int) -> str:
    return f"{messages} message{'' if messages == 1 else 's'}, {tokens:,} tokens"


def _run_range(run: list[_Item]) -> _Range:
    seqs: list[int] = []
    for item in run:
        seqs += [e.position for e in item[0].entries]
    return (min(seqs), max(seqs), run[0][1], run[0][2], run)
