"""The session-state card: a deterministic block of what matters, built from the log, under its own cap."""

from __future__ import annotations

import itertools
import operator
from collections import Counter
from collections.abc import Callable

import msgspec
from contextledger.projections.card_config import HISTORY_AS_OF
from contextledger.projections.card_state import CardConfig, CardState
from contextledger.projections.state import WorkingContext

__all__ = ["CARD_HEADER", "RECALL_SPAN", "CardView", "omitted_spans"]

CARD_HEADER = (
    "[Session state at log position {position}, kept by contextledger from the log; not the user's words]"
)
RECALL_SPAN = 'recall {{"from": {first}, "through": {last}}}'
"""The handle of an omitted span: the ``recall`` tool lists the span's events and expands any of them."""


class CardView(msgspec.Struct, frozen=True, kw_only=True):
    """How much of each section one rendering of the card shows (shrunk until the card fits its cap)."""

    users: int = 1_000
    user_chars: int = 2_000
    files: int = 40
    read: int = 10
    decisions: int = 30
    errors: int = 8
    todo: int = 40
    spans: int = 40
    tools: bool = True


def _shown(window: WorkingContext) -> set[int]:
    """Positions the window shows verbatim (whole messages, not stubs or truncations)."""
    return {e.position for g in window.groups for e in g.entries if e.kind == "message"}


def omitted_spans(window: WorkingContext, position: int) -> list[tuple[int, int, str]]:
    """Return the spans of positions 2..position no message of the window stands for, with how.

    A position is shown when an entry of the window renders it (verbatim, stubbed or truncated: a
    stub and a truncation carry their own handle); a shown summary stands for its span (``how`` is
    ``summarized``); every other span is ``omitted``. Spans are maximal and in order.
    """
    covered: list[tuple[int, int]] = sorted(
        {(e.position, e.position) for g in window.groups for e in g.entries}
        | {(s.covers_from, s.covers_through) for s in window.summaries}
    )
    summaries = sorted((s.covers_from, s.covers_through) for s in window.summaries)
    out: list[tuple[int, int, str]] = []
    at = 2
    for first, last in covered:
        if first > at:
            out.append((at, min(first - 1, position), "omitted"))
        at = max(at, last + 1)
        if at > position:
            break
    if at <= position:
        out.append((at, position, "omitted"))
    spans = [(f, t, "summarized") for f, t in summaries]
    return sorted([s for s in out if s[0] <= s[1]] + spans)


_tool = operator.itemgetter(1)
"""A tool result's tool name in ``CardState.results``."""


def _tools_in(card: CardState, first: int, last: int) -> str:
    """The results in ``first``..``last``: how many, and the four tools most frequent in their first 2,000.

    ``card.results`` is in position order (the fold appends each result), so the span is found by bisection:
    O(log n), where a list of every position made each compaction of a long session cost O(session).
    """
    results = card.results
    lo, hi = results.span(first, last)
    counts = Counter(map(_tool, results.items(lo, min(hi, lo + 2_000))))
    if not counts:
        return ""
    listed = ", ".join(f"{n} x{c}" for n, c in sorted(counts.items(), key=lambda i: (-i[1], i[0]))[:4])
    more = "" if len(counts) <= 4 else ", …"  # noqa: PLR2004 - four tools name a span well enough
    return f"; {hi - lo} tool results: {listed}{more}"


def _users(
    card: CardState, shown: set[int], view: CardView, over: tuple[int, Callable[[str], int]] | None = None
) -> list[str] | None:
    """Return the view's lines of hidden user messages; None when ``over`` proves the card cannot fit.

    The newest hidden messages are walked back to only as far as the view lists (``card.users`` is
    in log order: the shown ones are counted by bisecting). ``over`` is a cap and a lower bound of a
    text's count that never falls when the text grows by whole lines (``TokenFloor``): the lines are
    checked as they grow (at 8, 16, 32... lines), so a view whose user section alone is above the cap
    is given up after building what proves it. The lines are the same either way.
    """
    users = card.users
    hidden = len(users) - sum(1 for seq in shown if users.holds(seq))
    walk = (user for user in reversed(users) if user[0] not in shown)
    lines: list[str] = []
    check = 8
    for seq, text, whole in itertools.islice(walk, view.users):
        body = text if len(text) <= view.user_chars else text[: view.user_chars - 1] + "…"
        cut = "" if whole and body == text else f' (cut: recall {{"position": {seq}}})'
        lines.append(f"- seq {seq}: {body}{cut}")
        if over is not None and len(lines) == check:
            check *= 2
            if over[1]("\n".join(reversed(lines))) > over[0]:
                return None
    lines.reverse()
    if hidden > len(lines):
        handles = ", ".join(str(seq) for seq, _, _ in reversed(list(itertools.islice(walk, 20))))
        left = hidden - len(lines)
        lines.insert(0, f"- {left} earlier user messages not listed: recall positions {handles}")
    return lines


def _history(card: CardState, window: WorkingContext, position: int, wording: str) -> list[str]:
    """The line that marks the earlier requests shown above the card as history, when the session went on.

    The card renders after the window's leading head and user groups (``WorkingContext.card_after``). A user
    message among them that is not the user's latest, followed by positions no message shows, reads as
    pending to a model (a verbatim first task re-executed: peers' complaint 17); the line names them, the
    span after them and the latest request, by position only (no text is quoted).
    """
    users = card.users
    if not len(users):
        return []
    latest = users[-1][0]
    leading: list[int] = []
    for group in window.groups[:-1]:  # the card's place (``_refresh_card``): never after the newest group
        if not (group.head or group.is_user):
            break
        leading += [e.position for e in group.entries if e.role == "user" and e.kind == "message"]
    earlier = [p for p in leading if p < latest and users.holds(p)]
    if not earlier:
        return []
    after = [(first, last) for first, last, _ in omitted_spans(window, position) if first > earlier[-1]]
    if not after:
        return []
    listed = ", ".join(str(p) for p in earlier[:_EARLIER]) + (", …" if len(earlier) > _EARLIER else "")
    return [
        (
            f"Earlier requests shown above (seq {listed}) are history, not new instructions: "
            f"the session went on after them (seq {after[0][0]}-{position}, not all shown). "
            + (
                f"The user's current request is their last one: seq {latest} when this note was written, "
                "unless they asked for something after it."
                if wording == HISTORY_AS_OF
                else f"The user's latest message is seq {latest}."
            )
        )
    ]


_EARLIER = 8
"""How many earlier requests the history line names by position."""


def _plan(card: CardState, shown: set[int], view: CardView) -> list[str]:
    if card.todo is None or card.todo[0] in shown:
        return []
    seq, items = card.todo
    lines = [f"Current plan/todo list (latest revision, seq {seq}):", *(f"- {i}" for i in items[: view.todo])]
    if len(items) > view.todo:
        lines.append(f'- … {len(items) - view.todo} more items: recall {{"position": {seq}}}')
    return lines


def _files(card: CardState, view: CardView) -> list[str]:
    lines = []
    for title, paths, keep in (
        ("Files changed", card.changed, view.files),
        ("Files read", card.read, view.read),
    ):
        newest = list(paths.items())[-keep:] if keep else []
        if newest:
            lines.append(f"{title}: " + ", ".join(f"{p} ({s})" for p, s in reversed(newest)))
    return lines


def _said(card: CardState, shown: set[int], view: CardView) -> list[str]:
    lines = []
    decisions = [d for d in card.decisions if d[0] not in shown][-view.decisions :] if view.decisions else []
    if decisions:
        lines.append("Decisions announced:")
        lines += [f"- seq {seq}: {text}" for seq, text in decisions]
    errors = [e for e in card.errors if e[0] not in shown][-view.errors :] if view.errors else []
    if errors:
        lines.append("Errors and resolutions:")
        lines += [f"- seq {seq} {what} → {fix or 'unresolved'}" for seq, what, fix in errors]
    return lines


def _index(card: CardState, window: WorkingContext, position: int, view: CardView) -> list[str]:
    spans = omitted_spans(window, position)
    if not spans:
        return []
    lines = ['Not shown verbatim (recall {"position": N} reads one event):']
    listed = spans[-view.spans :]
    if len(spans) > len(listed):
        first, last = spans[0][0], spans[len(spans) - len(listed) - 1][1]
        handle = RECALL_SPAN.format(first=first, last=last)
        lines.append(f"- {first}-{last}: {len(spans) - len(listed)} spans → {handle}")
    for first, last, how in listed:
        tools = _tools_in(card, first, last) if view.tools else ""
        what = "summarized above" if how == "summarized" else "omitted"
        lines.append(f"- {first}-{last}: {what}{tools} → {RECALL_SPAN.format(first=first, last=last)}")
    return lines


def _text(
    card: CardState,
    window: WorkingContext,
    *,
    shown: set[int],
    position: int,
    view: CardView,
    pending: list[str],
    users: list[str],
    index: bool,
    history: str = "",
) -> str:
    lines = [CARD_HEADER.format(position=position)]
    if history:
        lines += _history(card, window, position, history)
    if users:
        lines += [
            "User instructions no longer shown verbatim (they still apply unless the user changed them):"
        ]
        lines += users
    lines += _plan(card, shown, view)
    if pending:
        lines.append("Calls in flight: " + "; ".join(pending))
    lines += _files(card, view)
    lines += _said(card, shown, view)
    if index:
        lines += _index(card, window, position, view)
    return "\n".join(lines)


_VIEWS = (
    CardView(),
    CardView(read=4, user_chars=800, spans=12, tools=False),
    CardView(read=0, decisions=20, errors=4, user_chars=600, spans=8, tools=False),
    CardView(files=30, read=0, decisions=14, errors=3, user_chars=400, spans=6, tools=False),
    CardView(files=20, read=0, decisions=8, errors=2, user_chars=300, spans=4, tools=False),
    CardView(
        users=12, files=10, read=0, decisions=4, errors=1, user_chars=240, todo=20, spans=3, tools=False
    ),
    CardView(users=6, files=4, read=0, decisions=1, errors=1, user_chars=160, todo=12, spans=2, tools=False),
    CardView(users=3, files=0, read=0, decisions=0, errors=0, user_chars=120, todo=8, spans=2, tools=False),
)
"""Ever smaller views: files read and span details go first, then decisions and errors, then files changed."""


def fit_card(
    card: CardState,
    window: WorkingContext,
    position: int,
    pending: list[str],
    *,
    cap: int,
    count: Callable[[str], int],
    first: CardView | None = None,
    at_least: Callable[[str], int] | None = None,
    index: bool = True,
    history: str = "",
) -> tuple[str, int]:
    """Return the richest card text whose size (``count``) is within ``cap``, and that size.

    ``first`` is the richest view tried (the policy's list sizes); each next step shows fewer items
    per section (``_VIEWS``); what is left out stays counted with a recall handle. A card that does
    not fit even at the last step is cut to its first lines. ``at_least`` (a lower bound of ``count``
    that needs no tokenizing) rejects a view that cannot fit without counting it: the views of a long
    session list hundreds of hidden user messages, and counting each was a turn's cost growing with the
    session. A view whose user lines alone are above the cap is given up while they are built. The text
    chosen is the same with or without it (the last view lists fewer user messages than the first
    check, so it is always built: a card cut to its cap is cut from it).
    """
    text = ""
    if cap <= 0:
        return "", 0
    shown = _shown(window)
    for view in (first or _VIEWS[0], *_VIEWS[1:]):
        users = _users(card, shown, view, None if at_least is None else (cap, at_least))
        if users is None:  # its user section alone is above the cap: the view cannot fit
            continue
        text = _text(
            card,
            window,
            shown=shown,
            position=position,
            view=view,
            pending=pending,
            users=users,
            index=index,
            history=history,
        )
        if at_least is not None and at_least(text) > cap:
            continue
        size = count(text)
        if size <= cap:
            return text, size
    lines = text.splitlines()
    while lines:
        lines.pop()
        text = "\n".join([*lines, "[card cut to its cap]"])
        if at_least is not None and at_least(text) > cap:
            continue
        size = count(text)
        if size <= cap:
            return text, size
    return "", 0


__all__ += ["CardConfig", "fit_card"]
