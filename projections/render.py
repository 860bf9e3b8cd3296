"""Rendering a state: arithmetic and assembly over precomputed counts, O(window), never tokenizing."""

from __future__ import annotations

from collections.abc import Callable

import msgspec
from contextledger.domain.content import InlineText, Text
from contextledger.domain.errors import PinnedOverBudgetError
from contextledger.projections.budget import Budget
from contextledger.projections.context import (
    MESSAGE_OVERHEAD,
    MediaMessage,
    RenderedContext,
    RenderedMessage,
)
from contextledger.projections.decisions import decisions
from contextledger.projections.ingest import PENDING_TEXT
from contextledger.projections.state import Entry, Group, RenderState, SummaryRef, WorkingContext

__all__ = [
    "MessageMemo",
    "check_fits",
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
