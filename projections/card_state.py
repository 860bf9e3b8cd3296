"""The session-state card's memory: what the log says matters, evolved one event at a time."""

from __future__ import annotations

import re

import msgspec
from contextledger.domain.content import InlineText, Text, text_preview
from contextledger.domain.events import (
    AssistantMessageAdded,
    ToolResultRecorded,
    UserMessageAdded,
    said_by_user,
)
from contextledger.projections.card_calls import CallFacts, call_facts, calls_facts, first_line, todo_items
from contextledger.projections.card_calls import clip as _clip
from contextledger.projections.card_config import CardConfig
from contextledger.projections.card_extract import SENTENCE_END, extract, folded
from contextledger.projections.position_log import PositionLog

__all__ = [
    "CARD_FACTS_FORMAT",
    "DECISION",
    "NO_FACTS",
    "CallFacts",
    "CardConfig",
    "CardState",
    "MessageFacts",
    "assistant_facts",
    "call_facts",
    "calls_facts",
    "checklist_of",
    "message_facts",
    "observe",
    "observe_assistant",
    "observe_result",
    "observe_user",
    "reports_error",
    "says_failed",
    "todo_items",
    "user_facts",
    "would_quote",
]

DECISION = re.compile(
    r"\b(?:I'll use|I will use|I'll go with|we'll use|let's use|I decided|we decided|decided to|"
    r"decision:|I chose|we chose|switch(?:ed|ing)? to|instead of|the fix is|the root cause|root cause is|"
    r"going with|I'll keep|we'll keep|I'll avoid|we'll avoid)\b",
    re.IGNORECASE,
)
"""A sentence in which the assistant announces a decision (the card's rule)."""
_DECISION_WORDS = (
    "i'll use", "i will use", "i'll go with", "we'll use", "let's use", "i decided", "we decided",
    "decided to", "decision:", "i chose", "we chose", "switch", "instead of", "the fix is",
    "the root cause", "root cause is", "going with", "i'll keep", "we'll keep", "i'll avoid", "we'll avoid",
)  # fmt: skip
"""A part of every phrase ``DECISION`` matches, lower-cased (a text whose ``folded`` form holds none holds no
decision)."""
_DECISION_CORES: tuple[str, ...] = (
    "use", "go", "decid", "decision:", "chose", "switch", "instead of", "fix is", "root cause",
    "keep", "avoid",
)  # fmt: skip
_DECISION_GROUPS = tuple((core, tuple(w for w in _DECISION_WORDS if core in w)) for core in _DECISION_CORES)
"""``_DECISION_WORDS`` grouped under a part each of them holds: a text holding no core holds no word.

Eleven scans of a text rule it out where twenty-one did; a core found sends only its group's words
to be looked for. Every word holds a core (``tests/projections/test_card_fast_paths.py``).
"""
_CHECK = re.compile(r"^\s*(?:[-*]|\d+[.)])\s*\[([ xX~-])\]\s*(.+?)\s*$", re.MULTILINE)
_CHECKBOX = re.compile(r"\[[ xX~-]\]")
"""The box every ``_CHECK`` line holds: none in the first ``_CHECKLIST_CHARS`` characters, no checklist."""
_CHECKLIST_CHARS = 20_000
"""How much of a message is searched for checklist lines."""
_ERROR = re.compile(
    r"^(?:Traceback \(most recent call last\)|[\w.]*(?:Error|Exception)\b|error:|fatal:|FAILED\b)",
    re.MULTILINE,
)
_ERROR_WORDS = ("Error", "Exception", "Traceback", "error:", "fatal:", "FAILED")
"""A word each of ``_ERROR``'s branches holds (``_may_report_error``)."""
_USER_CHARS = 2_000
"""A user message longer than this is kept by extraction (its imperative and negative sentences)."""
_KEEP = 60
"""How many decisions, errors and file paths the state remembers (the newest); the card shows fewer."""


class CardState(msgspec.Struct, kw_only=True, array_like=True):
    """What the card is built from; ``observe`` updates it in place (the fold owns its copy).

    ``users`` holds every user message (position, text: verbatim up to ``_USER_CHARS``, else its
    extraction); ``todo`` the latest todo/plan revision (position, ``[ ]``/``[x]`` lines);
    ``changed``/``read`` each path's latest position; ``decisions`` and ``errors`` the newest
    ``_KEEP``; ``results`` each tool result's position and tool (for the index of omitted spans);
    ``open_error`` the index in ``errors`` of an error no assistant message answered yet. ``users`` and
    ``results`` grow with the session: they are ``PositionLog``s, whose copy does not (ADR 0081).
    """

    users: PositionLog[tuple[int, str, bool]] = msgspec.field(default_factory=PositionLog)
    todo: tuple[int, tuple[str, ...]] | None = None
    changed: dict[str, int] = msgspec.field(default_factory=dict)
    read: dict[str, int] = msgspec.field(default_factory=dict)
    decisions: list[tuple[int, str]] = msgspec.field(default_factory=list)
    errors: list[tuple[int, str, str]] = msgspec.field(default_factory=list)
    results: PositionLog[tuple[int, str]] = msgspec.field(default_factory=PositionLog)
    open_error: int | None = None

    def copy(self) -> CardState:
        """Return an independent copy: O(what it remembers), but O(their chunks) for the two logs."""
        return CardState(
            users=self.users.copy(),
            todo=self.todo,
            changed=dict(self.changed),
            read=dict(self.read),
            decisions=list(self.decisions),
            errors=list(self.errors),
            results=self.results.copy(),
            open_error=self.open_error,
        )


def _text(content: Text | None, full_text: str | None) -> str:
    if content is None:
        return ""
    if isinstance(content, InlineText):
        return content.text
    return full_text if full_text is not None else text_preview(content)


def checklist_of(text: str) -> tuple[str, ...]:
    """Return the checklist lines of a message (``- [ ] item``, ``1. [x] item``) as ``[ ]``/``[x]`` lines."""
    if _CHECKBOX.search(text, 0, _CHECKLIST_CHARS) is None:  # every checklist line holds one: most texts none
        return ()
    return tuple(
        f"[{'x' if mark in 'xX' else ' ' if mark == ' ' else '~'}] {_clip(item)}"
        for mark, item in _CHECK.findall(text[:_CHECKLIST_CHARS])
    )


def _remember(paths: dict[str, int], found: tuple[str, ...], seq: int) -> None:
    for path in found:
        paths.pop(path, None)
        paths[path] = seq
    while len(paths) > _KEEP:
        del paths[next(iter(paths))]


def observe(
    card: CardState, seq: int, event: object, full_text: str | None, *, user_extract: bool = True
) -> None:
    """Take one logged event into the card's state (in place).

    User messages are kept whole (long ones by extraction: ``extract``); an assistant message's
    todo-tool call or checklist is the new plan revision, its decision sentences are remembered,
    its tool calls' files are read or changed (``shell_files``), and it resolves an open error;
    a failed tool result is an error. Tool output is never read for anything but its failure.
    The fold calls the function of the event's type (``observe_user``...) directly.
    """
    if isinstance(event, UserMessageAdded):
        observe_user(card, seq, event, full_text, user_extract=user_extract)
    elif isinstance(event, AssistantMessageAdded):
        observe_assistant(card, seq, event, full_text)
    elif isinstance(event, ToolResultRecorded):
        observe_result(card, seq, event, full_text)


class MessageFacts(msgspec.Struct, frozen=True, array_like=True):
    """What the card takes from one message: a function of its text and calls, the same under every policy.

    An assistant message's decision sentences (clipped), its checklist when it has two lines or more,
    and the facts of its tool calls (``calls_facts``: the plan each writes, the files each touches);
    a long user message's extraction. Finding them scans the whole text and parses every call, so a
    rebuild keeps them as rows (``application/rebuild/card_facts.py``) and a later rebuild under another
    policy reads them.
    """

    decisions: tuple[str, ...] = ()
    plan: tuple[str, ...] = ()
    extract: str | None = None
    calls: tuple[CallFacts, ...] = ()
    """One per tool call of the message, in order; ``()`` when none of them has any."""


NO_FACTS = MessageFacts()
CARD_FACTS_FORMAT = 2
"""Part of the name of the kept facts: raise it when a change here changes what ``*_facts`` return."""


def assistant_facts(text: str) -> MessageFacts:
    """The facts of an assistant message's text: its decision sentences and its plan (checklist).

    Its tool calls' facts are ``message_facts``'s to add (``calls_facts``).
    """
    head = text[:20_000]
    decisions = (
        tuple(_clip(s) for s in SENTENCE_END.split(head) if _may_decide(s)) if _may_decide(head) else ()
    )
    plan = checklist_of(text)
    if len(plan) < 2:  # noqa: PLR2004 - one checkbox is a remark, two are a plan
        plan = ()
    return MessageFacts(decisions, plan) if decisions or plan else NO_FACTS


def user_facts(text: str) -> MessageFacts:
    """The facts of a user message's text: its extraction when it is too long to keep whole."""
    return NO_FACTS if len(text) <= _USER_CHARS else MessageFacts(extract=extract(text))


def message_facts(event: object, full_text: str | None) -> MessageFacts | None:
    """The facts of a user or assistant message (its text as ``observe`` reads it, its calls), else None."""
    if isinstance(event, AssistantMessageAdded):
        found = assistant_facts(_text(event.content, full_text))
        calls = calls_facts(event.tool_calls)
        return msgspec.structs.replace(found, calls=calls) if calls else found
    if isinstance(event, UserMessageAdded):
        return user_facts(_text(event.content, full_text))
    return None


def observe_user(
    card: CardState,
    seq: int,
    event: UserMessageAdded,
    full_text: str | None,
    facts: MessageFacts | None = None,
    *,
    user_extract: bool = True,
) -> None:
    """``observe`` of a user message: kept whole, or by extraction when it is long.

    ``facts``, when given, are ``user_facts`` of the same text, found earlier. A message that is not
    the user's words (``said_by_user``) is not kept: the card never lists it as the user's.
    """
    if not said_by_user(event):
        return
    text = _text(event.content, full_text)
    if len(text) <= _USER_CHARS or not user_extract:
        card.users.append((seq, text, True))
        return
    kept = facts.extract if facts is not None else None
    card.users.append((seq, extract(text) if kept is None else kept, False))


def observe_assistant(
    card: CardState,
    seq: int,
    event: AssistantMessageAdded,
    full_text: str | None,
    facts: MessageFacts | None = None,
) -> None:
    """``observe`` of an assistant message: plan, decisions, files of its calls, an error resolved.

    ``facts``, when given, are ``message_facts`` of the same message, found earlier.
    """
    # The text is read only to find the facts or to close an open error (not for most messages of a rebuild).
    needed = facts is None or card.open_error is not None
    _assistant(card, seq, event, _text(event.content, full_text) if needed else "", facts)


def observe_result(card: CardState, seq: int, event: ToolResultRecorded, full_text: str | None) -> None:
    """``observe`` of a tool result: its position and tool, and an error when it failed."""
    card.results.append((seq, event.tool_name))
    text = _text(event.content, full_text)
    if reports_error(event, text):
        first = _clip(first_line(text) or "(no output)", 120)
        card.errors.append((seq, f"{event.tool_name}: {first}", ""))
        card.errors = card.errors[-_KEEP:]
        card.open_error = len(card.errors) - 1


def reports_error(event: ToolResultRecorded, text: str) -> bool:
    """Whether a tool result failed, by the card's rule (``says_failed``)."""
    return says_failed(event.is_error, text)


def says_failed(is_error: bool, text: str) -> bool:
    """The one rule for a failed tool result: flagged so, or its first 200 characters say so at a line start.

    A traceback, ``…Error``/``…Exception`` opening a line, ``error:``, ``fatal:`` or ``FAILED``: words that
    merely mention an error (``0 failed``, ``class ValidationError(Exception)``) are not a failure.
    """
    return is_error or (_may_report_error(text) and _ERROR.search(text, 0, 200) is not None)


def would_quote(event: object, text: str) -> bool:
    """Whether the card may quote any of ``event``'s ``text`` once the window no longer shows the event.

    Every user message (whole, or its extraction); an assistant message with text or tool calls (its
    decisions, plan, the files its calls touch, or its first words as an error's resolution); a failed
    tool result (its first line). False is exact: a passing tool result gives the card its position
    and tool name only, and other events nothing. ``why`` over recorded calls renders a call again
    only when a carrier the call no longer shows whole may be quoted (ADR 0082).
    """
    if isinstance(event, UserMessageAdded):
        return True
    if isinstance(event, AssistantMessageAdded):
        return bool(text.strip() or event.tool_calls)
    if isinstance(event, ToolResultRecorded):
        return reports_error(event, text)
    return False


def _may_report_error(text: str) -> bool:
    """Whether ``_ERROR`` may match in ``text[:200]`` (False is exact: every match holds one of the words).

    Most tool outputs hold none of them, and the substring tests cost a fraction of the pattern's
    search, which tries a run of word characters at every line start.
    """
    head = text[:200]
    for word in _ERROR_WORDS:  # noqa: SIM110 - a loop, not any(): this runs for every tool result
        if word in head:
            return True
    return False


def _may_decide(text: str) -> bool:
    """Whether a text may hold a decision sentence (False is exact; True is checked by the pattern).

    A sentence holding a decision is a part of the text holding it, so the text is searched first;
    the text folded as the case-blind ``DECISION`` compares letters (``folded``) holds every phrase
    it matches lower-cased, so a plain substring test of ``_DECISION_WORDS`` rules out most texts
    before any regular expression runs (the regular expression over every assistant text was the
    largest cost of a rebuild).
    """
    lowered = folded(text)
    for core, words in _DECISION_GROUPS:  # loops, not any(): this runs for every assistant message
        if core in lowered:
            for word in words:
                if word in lowered:
                    break
            else:
                continue
            break
    else:
        return False
    return DECISION.search(text) is not None


def _assistant(
    card: CardState, seq: int, event: AssistantMessageAdded, text: str, facts: MessageFacts | None
) -> None:
    if card.open_error is not None and text.strip():
        at, what, _ = card.errors[card.open_error]
        card.errors[card.open_error] = (at, what, f"seq {seq}: {_clip(text, 120)}")
        card.open_error = None
    found = assistant_facts(text) if facts is None else facts
    if found.decisions:
        decisions = card.decisions
        decisions.extend((seq, sentence) for sentence in found.decisions)
        if len(decisions) > _KEEP:
            del decisions[:-_KEEP]
    if found.plan:
        card.todo = (seq, found.plan)
    for call in calls_facts(event.tool_calls) if facts is None else facts.calls:
        if call.todos is not None:
            card.todo = (seq, call.todos)
        if call.changed:
            _remember(card.changed, call.changed, seq)
        if call.read:
            _remember(card.read, tuple(p for p in call.read if p not in card.changed), seq)
