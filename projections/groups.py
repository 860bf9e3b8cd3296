"""Operations on the window shared by the reducers: pins, replacing entries, removing groups."""

from __future__ import annotations

import bisect
from collections.abc import Iterable

import msgspec
from contextledger.domain.ports import TokenCounter
from contextledger.projections.context import MESSAGE_OVERHEAD, DecisionAction
from contextledger.projections.state import Entry, Group, PendingCall, Removed, RenderState, WorkingContext

__all__ = [
    "add_result",
    "extend_request",
    "group_positions",
    "leave_head",
    "pin_reason",
    "remove_groups",
    "replace_entries",
    "resize_group",
    "stub_results",
    "stub_text",
]


def group_positions(group: Group) -> list[int]:
    """Return the log positions a group renders from."""
    return [e.position for e in group.entries]


def extend_request(state: RenderState, position: int, tokens: int, cap: int, *, opens: bool = True) -> None:
    """The user-role message at ``position`` starts the current request, or extends it (no step since).

    The request is pinned whole (``pin_whole_request``) while its messages fit ``cap`` (one message's
    cap): a run of user messages with no reply (a log of notes, a writer's appends) then pins from the
    message that passed it on, never more than the budget. An agent's note in the user's place never opens
    a request (``opens`` False) but, inside one, is pinned with it and so counted with it.
    """
    if state.request_from is None or state.steps > state.request_steps:
        if opens:
            state.request_from, state.request_steps, state.request_tokens = position, state.steps, tokens
    elif state.request_tokens + tokens > cap:
        state.request_from, state.request_tokens = position, tokens
    else:
        state.request_tokens += tokens


def pin_reason(group: Group, state: RenderState) -> str | None:
    """Return why a group may not be evicted (the rule name), or None when it may be."""
    if group.head:
        return "keep_first"
    if group.start == state.first_user:
        return "first-task"
    if group.start == state.latest_user or (
        state.request_from is not None and state.request_from <= group.start <= (state.latest_user or 0)
    ):  # the latest request, all of it: a spec sent before "implement it" (``pin_whole_request``)
        return "latest-user"
    if group.pending:
        return "pending-call"
    if state.pins and any(e.position in state.pins for e in group.entries):
        return "explicit"
    return None


def resize_group(
    group: Group,
    entries: tuple[Entry, ...],
    pending_tokens: int,
    pending: tuple[PendingCall, ...] | None = None,
) -> Group:
    """Return ``group`` with new entries (and new pending calls, if given) and its token sums recomputed."""
    calls = group.pending if pending is None else pending
    tokens = sum(e.tokens for e in entries) + len(calls) * pending_tokens
    tool_tokens = sum(e.tokens for e in entries if e.is_result)
    return msgspec.structs.replace(
        group, entries=entries, pending=calls, tokens=tokens, tool_tokens=tool_tokens
    )


def replace_entries(
    window: WorkingContext,
    index: int,
    entries: tuple[Entry, ...],
    pending_tokens: int,
    pending: tuple[PendingCall, ...] | None = None,
) -> None:
    """Replace the entries (and pending calls, if given) of the group at ``index``, keeping the sums right."""
    old = window.groups[index]
    new = resize_group(old, entries, pending_tokens, pending)
    window.groups[index] = new
    window.tokens += new.tokens - old.tokens
    window.tool_tokens += new.tool_tokens - old.tool_tokens


def add_result(
    window: WorkingContext, index: int, entry: Entry, pending_tokens: int, pending: tuple[PendingCall, ...]
) -> None:
    """Add the tool result ``entry`` to the group at ``index``, whose calls still waiting are ``pending``.

    ``replace_entries`` with the group's entries and ``entry``, its sums moved rather than summed again
    (``resize_group``'s, kept: the entry's tokens come in, and a placeholder goes out per call answered).
    A step's results arrive one at a time, and summing its whole group at each made it quadratic.
    """
    old = window.groups[index]
    tokens = entry.tokens - (len(old.pending) - len(pending)) * pending_tokens
    window.groups[index] = msgspec.structs.replace(
        old,
        entries=(*old.entries, entry),
        pending=pending,
        tokens=old.tokens + tokens,
        tool_tokens=old.tool_tokens + entry.tokens,
    )
    window.tokens += tokens
    window.tool_tokens += entry.tokens


def leave_head(state: RenderState, index: int) -> None:
    """Take the group at ``index`` and every head group after it out of the head (``head_cap_strict``).

    The head is a prefix of the window: what is left of it ends where it ended before that group. The
    summaries and the card render right after the head, so they move up: a deliberate prefix change,
    counted as a compaction point (as a pin's is).
    """
    groups = state.window.groups
    for at in range(index, len(groups)):
        group = groups[at]
        if group.head:
            groups[at] = msgspec.structs.replace(group, head=False)
            state.head_tokens -= group.tokens
    state.head_end = max((e.position for g in groups[:index] if g.head for e in g.entries), default=0)
    state.compactions += 1


def remove_groups(window: WorkingContext, indices: Iterable[int], action: DecisionAction, rule: str) -> int:
    """Remove the groups at ``indices`` in one pass and record them as coalesced ranges.

    Consecutive removed groups make one range; a range merges with the previous record of the
    same action and rule when no kept group lies between them. Returns the tokens freed.
    """
    doomed = set(indices)
    if not doomed:
        return 0
    kept: list[Group] = []
    runs: list[Removed] = []
    freed = 0
    current: Removed | None = None
    for i, group in enumerate(window.groups):
        if i not in doomed:
            kept.append(group)
            if current is not None:
                runs.append(current)
                current = None
            continue
        freed += group.tokens
        window.tool_tokens -= group.tool_tokens
        positions = group_positions(group)
        if current is None:
            current = Removed(
                first=min(positions),
                last=max(positions),
                action=action,
                rule=rule,
                messages=group.messages,
                tokens=group.tokens,
            )
        else:
            current = msgspec.structs.replace(
                current,
                first=min(current.first, *positions),
                last=max(current.last, *positions),
                messages=current.messages + group.messages,
                tokens=current.tokens + group.tokens,
            )
    if current is not None:
        runs.append(current)
    window.tokens -= freed
    window.groups = kept
    window.index = {g.start: i for i, g in enumerate(kept)}
    starts = [g.start for g in kept]
    for run in runs:
        _record(window, run, starts)
    return freed


def _record(window: WorkingContext, run: Removed, kept_starts: list[int]) -> None:
    if window.removed:
        last = window.removed[-1]
        same = last.action == run.action and last.rule == run.rule
        if same and last.last < run.first:
            after = bisect.bisect_right(kept_starts, last.last)
            if after == len(kept_starts) or kept_starts[after] > run.first:
                window.removed[-1] = msgspec.structs.replace(
                    last,
                    last=run.last,
                    messages=last.messages + run.messages,
                    tokens=last.tokens + run.tokens,
                )
                return
    window.removed.append(run)


def stub_text(entry: Entry, verb: str = "result expired") -> str:
    """Return the stub that replaces a tool result: tool, call id, original size, restore position."""
    tool = entry.tool_name or "tool"
    return (
        f"[{verb}: {tool} {entry.tool_call_id}, {entry.full_tokens:,} tokens; restore: seq {entry.position}]"
    )


def stub_results(
    window: WorkingContext,
    targets: list[tuple[int, int, str]],
    counter: TokenCounter,
    pending_tokens: int,
    *,
    verb: str = "result expired",
) -> int:
    """Stub the results at ``(group index, entry index, rule)`` in one batch; return the tokens freed.

    The stub keeps the call paired (same ``tool_call_id``) and is counted through the port; a
    result that is already smaller than its stub is left as it is.
    """
    if not targets:
        return 0
    texts = [stub_text(window.groups[g].entries[e], verb) for g, e, _ in targets]
    counts = counter.count_many(texts)
    by_group: dict[int, dict[int, Entry]] = {}
    for (g, e, rule), text, count in zip(targets, texts, counts, strict=True):
        old = window.groups[g].entries[e]
        if count + MESSAGE_OVERHEAD >= old.tokens:
            continue  # a result smaller than its stub stays as it is
        by_group.setdefault(g, {})[e] = msgspec.structs.replace(
            old, kind="stub", text=text, tokens=count + MESSAGE_OVERHEAD, rule=rule, short_text=None
        )
    before = window.tokens
    for g, changes in by_group.items():
        entries = tuple(changes.get(i, entry) for i, entry in enumerate(window.groups[g].entries))
        replace_entries(window, g, entries, pending_tokens)
    return before - window.tokens
