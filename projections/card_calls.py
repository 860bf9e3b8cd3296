"""What the session-state card takes from a tool call: the plan it writes and the files it touches."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

import msgspec
from contextledger.domain.events import ToolCall
from contextledger.projections.shell_files import files_of_call
from contextledger.projections.wire import arguments_object

__all__ = ["NO_CALL_FACTS", "CallFacts", "call_facts", "calls_facts", "clip", "first_line", "todo_items"]

_TODO_TOOL = re.compile(r"todo|plan|task", re.IGNORECASE)
"""A tool whose name says it keeps a plan: the list its call writes is the new plan revision."""
_CALL_FACTS = 4_096
"""How many distinct tool calls ``call_facts`` remembers (by name and argument text)."""
_LINE = 300
"""How long a line the card shows (``clip``)."""
_CLIP_HEAD = 4
"""``clip`` first reads this many times its limit of a long text (whitespace runs shorten a head's line)."""
_FIRST_LINE = re.compile(r"\s*([^\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]*)")
"""A text's leading whitespace (``\\s`` is ``str.isspace``, what ``strip`` strips), then the characters up to
the next line boundary of ``str.splitlines`` (every boundary is whitespace: a line found is never empty)."""


def clip(text: str, limit: int = _LINE) -> str:
    """One line of at most ``limit`` characters: whitespace runs made one space, an ellipsis when cut.

    A long text is read from a head of ``_CLIP_HEAD`` times ``limit`` characters first: the head's line is a
    prefix of the whole text's, so when it is already longer than ``limit`` the cut is the same (a card clips
    whole assistant messages and tool outputs, many times a rebuild). Otherwise the whole text is read.
    """
    head = _CLIP_HEAD * limit
    if len(text) > head:
        one = " ".join(text[:head].split())
        if len(one) > limit:
            return one[: limit - 1] + "…"
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def first_line(text: str) -> str | None:
    """The first line of ``text.strip()`` (``splitlines``), give or take trailing whitespace; None when blank.

    Only the leading whitespace and that line are read: a tool output's first line is what a card
    reports of a failed call, and the output can be long.
    """
    found = _FIRST_LINE.match(text)  # matches every text (both parts may be empty)
    return (found.group(1) if found else "") or None


def todo_items(arguments: object) -> tuple[str, ...] | None:
    """Return the whole list a todo-style tool call writes (``todos``/``items``/``tasks``), or None."""
    if not isinstance(arguments, dict):
        return None
    for key in ("todos", "items", "tasks", "plan"):
        todos = arguments.get(key)
        if not isinstance(todos, list):
            continue
        lines = []
        for todo in todos:
            if isinstance(todo, str):
                lines.append(f"[ ] {clip(todo)}")
            elif isinstance(todo, dict):
                text = todo.get("content") or todo.get("title") or todo.get("task") or todo.get("step")
                status = str(todo.get("status", "pending"))
                mark = "x" if status in {"completed", "done"} else "~" if status == "in_progress" else " "
                if isinstance(text, str):
                    lines.append(f"[{mark}] {clip(text)}")
        return tuple(lines)
    return None


class CallFacts(msgspec.Struct, frozen=True, array_like=True):
    """What the card takes from one tool call: the plan it writes (or None), the files it reads and edits."""

    todos: tuple[str, ...] | None = None
    read: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()


NO_CALL_FACTS = CallFacts()
"""The facts of a call that writes no plan and touches no file (most calls)."""


@functools.lru_cache(maxsize=_CALL_FACTS)
def call_facts(name: str, arguments: str) -> CallFacts:
    """Return what the card takes from one tool call: the plan it writes (or None) and the files it touches.

    The plan is the whole list of a todo-style call (``todo_items``) whose tool name says it keeps
    one (``todo``, ``plan``, ``task``); the files are ``files_of_call`` of its arguments parsed as a
    JSON object (none when they are not one). A pure function of the call's name and argument text,
    so it is remembered by them: a call seen again (a repeated command) is not parsed again.
    """
    parsed = arguments_object(arguments) or {}
    todos = todo_items(parsed) if _TODO_TOOL.search(name) else None
    touched = files_of_call(name, parsed)
    if todos is None and not touched.read and not touched.changed:
        return NO_CALL_FACTS
    return CallFacts(todos, touched.read, touched.changed)


def calls_facts(calls: Sequence[ToolCall]) -> tuple[CallFacts, ...]:
    """``call_facts`` of each of a message's tool calls, in order; ``()`` when none has any.

    Parsing the calls' arguments (a shell command's words) is what the card spends most on in sessions
    of shell commands, and the facts depend on the calls alone: a rebuild keeps them with the message's
    (``MessageFacts.calls``) and a rebuild under another policy reads them.
    """
    found = tuple(call_facts(call.name, call.arguments) for call in calls)
    return found if any(f is not NO_CALL_FACTS for f in found) else ()
