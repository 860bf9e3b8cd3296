"""Rendering a state: arithmetic and assembly over precomputed counts, O(window), never tokenizing."""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
from collections.abc import Callable

import msgspec
from contextledger.domain.content import InlineText, Text
from contextledger.domain.errors import PinnedOverBudgetError
from contextledger.projections.budget import Budget
from contextledger.projections.context import (
    MESSAGE_OVERHEAD,
    SHOWN_AS_SUMMARY,
    Decision,
    DecisionAction,
    MediaMessage,
    RenderedContext,
    RenderedMessage,
)
from contextledger.projections.groups import pin_reason
from contextledger.projections.ingest import PENDING_TEXT
from contextledger.projections.state import Entry, Group, Removed, RenderState, SummaryRef, WorkingContext
from contextledger.projections.wire import REQUEST_OVERHEAD

__all__ = [
    "MessageMemo",
    "check_fits",
    "decisions",
    "eviction_counts",
    "messages_as_logged",
    "render",
    "summary_framing",
    "summary_header",
]

MessageMemo = dict[int, tuple[Entry, RenderedMessage]]
"""The messages one render built from entries, by the entry's identity (with the entry, kept alive)."""


def render(
    state: RenderState,
    resolve: Callable[[Text], str],
    *,
    budget: Budget,
    policy: str,
    tokenizer: str,
    card_tail: bool = False,
    memo: MessageMemo | None = None,
    with_decisions: bool = True,
    stand_in: Callable[[int], str] | None = None,
) -> RenderedContext:
    """Assemble the context of ``state``: system, pinned head, summaries, card, verbatim history.

    The session-state card sits in the stable prefix after the summaries (refreshed only at
    compaction points), or at the very end when the policy places it in the tail.

    Args:
        state: The folded state.
        resolve: Returns the full text of a logged content; called only for messages shown verbatim
            whose content is a blob (an inline content is its own text, which every resolver returns).
        budget: The budget the state was folded under.
        policy: The policy's name, recorded in the context.
        tokenizer: The tokenizer's name, recorded in the context.
        card_tail: Render the session-state card at the end instead of in the stable prefix.
        memo: The messages the previous render of this session built, by entry: an entry (frozen)
            renders to the same message every time, so an entry shown again reuses it (and the
            caller sees the same message object, unchanged). Left holding this render's messages.
        with_decisions: False leaves ``decisions`` empty (a caller that needs only the evictions
            counts them from the state: ``eviction_counts``).
        stand_in: Given, a message that shows its event's non-empty inline text as logged shows
            ``stand_in(position)`` instead (a render digest names such texts by position, ADR 0064).
            A memo holds the messages of renders with the same ``stand_in``.

    Raises:
        PinnedOverBudgetError: The pinned items alone exceed the budget's target.
    """
    check_fits(state, budget)
    messages: list[RenderedMessage] = []
    stable = -1
    window = state.window
    tail = card_tail
    card = [] if tail or not window.card else [_card_message(window)]
    built: MessageMemo | None = None if memo is None else {}
    for group in window.groups:
        if not group.head and stable < 0:
            messages.extend(_summary_message(s, resolve) for s in window.summaries)
            stable = len(messages)
        if card and not group.head and group.start > window.card_after:
            # The card follows the leading user messages (the pinned task, the latest request): it
            # changes at every compaction point, they seldom do.
            messages.extend(card)
            card, stable = [], len(messages)
        messages.extend(_group_messages(group, resolve, state.pending_tokens, memo, built, stand_in=stand_in))
    if memo is not None and built is not None:
        memo.clear()
        memo.update(built)
    if stable < 0:
        messages.extend(_summary_message(s, resolve) for s in window.summaries)
        stable = len(messages)
    if card:
        messages.extend(card)
        stable = len(messages)
    if tail and window.card:
        messages.append(_card_message(window))
    return RenderedContext(
        session_id=state.session_id,
        position=state.position,
        policy=policy,
        tokenizer=tokenizer,
        system=state.system,
        system_tokens=state.system_tokens,
        tools=state.tools,
        tools_tokens=state.tools_tokens,
        messages=tuple(messages),
        stable_prefix=stable,
        tokens=state.system_tokens + state.tools_tokens + sum([m.tokens for m in messages]),
        budget=budget.prompt_limit,
        decisions=decisions(state) if with_decisions else (),
        summary_id=state.window.summaries[-1].summary_id if state.window.summaries else None,
    )


def check_fits(state: RenderState, budget: Budget) -> None:
    """Refuse a state that cannot render under ``budget`` (``render`` checks it first).

    Raises:
        PinnedOverBudgetError: The pinned items alone exceed the budget's target.
    """
    if state.total > budget.target:
        raise PinnedOverBudgetError(state.total, budget.target)


def messages_as_logged(state: RenderState) -> int | None:
    """How many logged messages ``render`` shows when it shows the log as it is, else None.

    As it is: no removed range, summary or card, and every entry in its logged form (``kind`` "message": no
    stub, cut form or media note). The render then shows every message event of the session up to its last,
    whole and in log order (a placeholder after each call still waiting for its result), whatever the
    policy: within a session, their number names the render for a given tokenizer (ADR 0070).
    """
    window = state.window
    if window.removed or window.summaries or window.card:
        return None
    shown = 0
    for group in window.groups:
        for entry in group.entries:
            if entry.kind != "message":
                return None
        shown += len(group.entries)
    return shown


def summary_header(summary: SummaryRef) -> str:
    """The line that marks a summary as what it is: earlier turns condensed, never words the user said."""
    return _header(summary.covers_from, summary.covers_through)


def _header(covers_from: int, covers_through: int) -> str:
    return (
        f"[Summary of earlier turns (log positions {covers_from}-{covers_through}), "
        "made by contextledger; not the user's words]\n"
    )


def summary_framing(count: Callable[[str], int], covers_from: int, covers_through: int) -> int:
    """Tokens a summary of that span takes beyond its text once shown: its header and a message's overhead.

    The fold measures an artifact with them (``SummaryConfig.fits``), and a summary worker holds its text to
    the policy's ``max_tokens`` less them: within the bound but not framed, it was recorded and never shown.
    """
    return count(_header(covers_from, covers_through)) + MESSAGE_OVERHEAD


def _summary_message(summary: SummaryRef, resolve: Callable[[Text], str]) -> RenderedMessage:
    return RenderedMessage(
        role="user",
        text=summary_header(summary) + resolve(summary.content),
        tokens=summary.tokens,
        kind="summary",
        sources=(summary.covers_from, summary.covers_through),
    )


def _card_message(window: WorkingContext) -> RenderedMessage:
    return RenderedMessage(role="user", text=window.card, tokens=window.card_tokens, kind="card")


def _group_messages(
    group: Group,
    resolve: Callable[[Text], str],
    pending_tokens: int,
    memo: MessageMemo | None = None,
    built: MessageMemo | None = None,
    *,
    stand_in: Callable[[int], str] | None = None,
) -> list[RenderedMessage]:
    if memo is None or built is None:
        out = [_entry_message(e, resolve, stand_in) for e in group.entries]
    else:
        out = []
        for entry in group.entries:
            known = memo.get(id(entry))
            if known is None or known[0] is not entry:
                known = (entry, _entry_message(entry, resolve, stand_in))
            built[id(entry)] = known
            out.append(known[1])
    out += [
        RenderedMessage(
            role="tool",
            text=PENDING_TEXT,
            tokens=pending_tokens,
            kind="stub",
            tool_call_id=p.call_id,
            tool_name=p.tool_name,
        )
        for p in group.pending
    ]
    return out


def _entry_message(
    entry: Entry, resolve: Callable[[Text], str], stand_in: Callable[[int], str] | None = None
) -> RenderedMessage:
    content = entry.content
    if entry.text is not None:
        text = entry.text
    elif isinstance(content, InlineText):
        text = content.text  # what every resolver returns for it, without the call (one per message)
    elif content is not None:
        text = resolve(content)
    else:
        text = ""
    if entry.media_note:
        text = f"{text}\n{entry.media_note}" if text else entry.media_note
    if stand_in is not None and isinstance(content, InlineText) and content.text and text == content.text:
        text = stand_in(entry.position)  # shown as logged: named by its position (``render``'s stand_in)
    if entry.media:
        media = tuple(msgspec.structs.replace(p, data=InlineText(resolve(p.data))) for p in entry.media)
        return MediaMessage(
            role=entry.role,
            text=text,
            tokens=entry.tokens,
            kind=entry.kind,
            sources=(entry.position,),
            media=media,
        )
    return RenderedMessage(
        role=entry.role,
        text=text,
        tokens=entry.tokens,
        kind=entry.kind,
        sources=(entry.position,),
        tool_calls=entry.tool_calls,
        tool_call_id=entry.tool_call_id,
        tool_name=entry.tool_name,
        is_error=entry.is_error,
    )


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
