"""What the session-state card takes from a tool call: the plan it writes and the files it touches."""

from __future__ import annotations

import functools
import re

from contextledger.projections.shell_files import FileTouches, files_of_call
from contextledger.projections.wire import arguments_object

__all__ = ["call_facts", "clip", "todo_items"]

_TODO_TOOL = re.compile(r"todo|plan|task", re.IGNORECASE)
"""A tool whose name says it keeps a plan: the list its call writes is the new plan revision."""
_CALL_FACTS = 4_096
"""How many distinct tool calls ``call_facts`` remembers (by name and argument text)."""
_LINE = 300
"""How long a line the card shows (``clip``)."""


def clip(text: str, limit: int = _LINE) -> str:
    """One line of at most ``limit`` characters: whitespace runs made one space, an ellipsis when cut."""
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


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


@functools.lru_cache(maxsize=_CALL_FACTS)
def call_facts(name: str, arguments: str) -> tuple[tuple[str, ...] | None, FileTouches]:
    """Return what the card takes from one tool call: the plan it writes (or None) and the files it touches.

    The plan is the whole list of a todo-style call (``todo_items``) whose tool name says it keeps
    one (``todo``, ``plan``, ``task``); the files are ``files_of_call`` of its arguments parsed as a
    JSON object (none when they are not one). A pure function of the call's name and argument text,
    so it is remembered by them: a call seen again (a rebuild, a repeated command) is not parsed again.
    """
    parsed = arguments_object(arguments) or {}
    todos = todo_items(parsed) if _TODO_TOOL.search(name) else None
    return todos, files_of_call(name, parsed)
