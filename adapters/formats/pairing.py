"""Checks of wire payloads: tool calls and results paired as the providers require, valid structure."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any, Literal

import msgspec
from contextledger.adapters.formats.common import is_blank
from contextledger.adapters.formats.openai import OPENAI_MAX_CALL_ID

__all__ = [
    "MAX_CACHE_BREAKPOINTS",
    "ProblemKind",
    "WireProblem",
    "check_anthropic_pairing",
    "check_anthropic_structure",
    "check_openai_pairing",
    "check_openai_structure",
]

MAX_CACHE_BREAKPOINTS = 4
"""Most ``cache_control`` blocks one Anthropic request may carry."""

ProblemKind = Literal[
    "orphaned_call",
    "orphaned_result",
    "result_before_call",
    "result_not_adjacent",
    "duplicate_call",
    "duplicate_result",
    "result_not_first",
    "misplaced_block",
    "malformed",
    "first_not_user",
    "roles_not_alternating",
    "empty_content",
    "blank_text",
    "too_many_breakpoints",
    "id_too_long",
]


class WireProblem(msgspec.Struct, frozen=True, kw_only=True):
    """One thing a provider would reject: its kind, the index in ``messages`` and a detail.

    ``message`` is -1 for problems outside ``messages`` (system, tools, the whole request).
    """

    kind: ProblemKind
    message: int
    detail: str = ""

    def __str__(self) -> str:
        """Return e.g. ``messages[3]: orphaned_result call_7``."""
        return f"messages[{self.message}]: {self.kind} {self.detail}".rstrip()


def check_openai_pairing(payload: dict[str, Any]) -> list[WireProblem]:
    """Return the pairing problems of a Chat Completions payload (empty when every pair is valid).

    Chat Completions requires each assistant message with ``tool_calls`` to be followed directly
    by one ``tool`` message per call (in any order), and each ``tool`` message to answer a call of
    the assistant message just before its run of tool messages. A call id must be unique among the
    calls awaiting results; once answered it may be issued again (gpt-4o does), and a result then
    answers the latest call with its id.

    Args:
        payload: A dict with ``messages`` as ``to_openai`` returns it.

    Returns:
        Problems in message order; unanswered calls come last.
    """
    messages: list[Any] = payload.get("messages", [])
    check = _OpenAIPairing(messages)
    owner: int | None = None
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "assistant":
            owner = index if message.get("tool_calls") else None
            check.issue([c.get("id") if isinstance(c, dict) else None for c in _calls(message)], index)
        elif role != "tool":
            owner = None
        else:
            check.answer(message.get("tool_call_id"), index, owner)
    return check.problems + _unanswered(check.waiting, set())


def _calls(message: dict[str, Any]) -> list[Any]:
    return list(message.get("tool_calls") or ())


class _OpenAIPairing:
    """One pass over Chat Completions messages: the calls awaiting results and the problems found."""

    def __init__(self, messages: list[Any]) -> None:
        self.problems: list[WireProblem] = []
        self.waiting: dict[str, int] = {}
        self.answered: set[str] = set()
        self.early: set[str] = set()
        self.later: Counter[str] = Counter(
            call["id"]
            for message in messages
            if message.get("role") == "assistant"
            for call in _calls(message)
            if isinstance(call, dict) and isinstance(call.get("id"), str)
        )

    def issue(self, ids: list[Any], index: int) -> None:
        """Register the calls of one assistant message; a duplicate is an id already awaiting a result."""
        for call_id in ids:
            if not isinstance(call_id, str):
                self._report("malformed", index, "tool call without id")
                continue
            self.later[call_id] -= 1
            if call_id in self.waiting:
                self._report("duplicate_call", index, call_id)
            elif call_id in self.early:
                self.early.discard(call_id)  # answered before it was issued: reported there
            else:
                self.waiting[call_id] = index

    def answer(self, call_id: Any, index: int, owner: int | None) -> None:
        """Classify one result: it answers the waiting call of its id, else say why it cannot."""
        if not isinstance(call_id, str):
            self._report("orphaned_result", index, "no tool_call_id")
            return
        at = self.waiting.pop(call_id, None)
        if at is not None:
            self.answered.add(call_id)
            if at != owner:
                self._report("result_not_adjacent", index, call_id)
        elif call_id in self.answered:
            self._report("duplicate_result", index, call_id)
        elif self.later[call_id] > 0:
            self.early.add(call_id)
            self._report("result_before_call", index, call_id)
        else:
            self._report("orphaned_result", index, call_id)

    def _report(self, kind: ProblemKind, index: int, detail: str) -> None:
        self.problems.append(WireProblem(kind=kind, message=index, detail=detail))


def _chat_content(content: object, role: str) -> bool:
    """Whether Chat Completions accepts ``content`` for ``role``: a string or a non-empty list of parts.

    Parts are typed; a ``tool`` or ``system`` message's are text parts only (a user's may hold images).
    """
    if isinstance(content, str):
        return True
    if not isinstance(content, list) or not content:
        return False
    typed = all(isinstance(p, dict) and isinstance(p.get("type"), str) for p in content)
    return typed and (role == "user" or all(p["type"] == "text" for p in content))


def check_openai_structure(payload: dict[str, Any]) -> list[WireProblem]:
    """Return the structural problems of a Chat Completions payload that the API rejects.

    Checked beyond the SDK types (which allow them): an assistant message with neither content
    nor tool calls, a tool, system or user message whose content is neither a string nor a list of typed
    parts (text parts only, but for a user's), and call ids longer than
    ``OPENAI_MAX_CALL_ID`` (40) characters.

    Args:
        payload: A dict with ``messages`` as ``to_openai`` returns it.

    Returns:
        Problems in message order; empty when the structure is valid.
    """
    problems: list[WireProblem] = []
    for index, message in enumerate(payload.get("messages", [])):
        role = message.get("role")
        calls = message.get("tool_calls") or []
        if role == "assistant" and message.get("content") is None and not calls:
            problems.append(WireProblem(kind="empty_content", message=index, detail="assistant"))
        if role in ("user", "tool", "system") and not _chat_content(message.get("content"), role):
            problems.append(WireProblem(kind="empty_content", message=index, detail=str(role)))
        ids = [message.get("tool_call_id")] + [c.get("id") for c in calls if isinstance(c, dict)]
        problems.extend(
            WireProblem(kind="id_too_long", message=index, detail=call_id)
            for call_id in ids
            if isinstance(call_id, str) and len(call_id) > OPENAI_MAX_CALL_ID
        )
    return problems


def check_anthropic_pairing(payload: dict[str, Any]) -> list[WireProblem]:
    """Return the pairing problems of a Messages payload (empty when every pair is valid).

    The Messages API requires each ``tool_use`` block of an assistant message to be answered by a
    ``tool_result`` block in the very next message, a user message, whose ``tool_result`` blocks
    come before any other block.

    Args:
        payload: A dict with ``messages`` as ``to_anthropic`` returns it.

    Returns:
        Problems in message order; unanswered calls come last.
    """
    messages: list[Any] = payload.get("messages", [])
    problems: list[WireProblem] = []
    calls: dict[str, int] = {}
    for index, role, block in _blocks(messages):
        if block.get("type") == "tool_use":
            if role == "assistant":
                problems.extend(_register_calls([block.get("id")], index, calls))
            else:
                problems.append(
                    WireProblem(kind="misplaced_block", message=index, detail=f"tool_use in {role}")
                )
    answered: dict[str, int] = {}
    other_seen: set[int] = set()
    for index, role, block in _blocks(messages):
        if block.get("type") != "tool_result":
            other_seen.add(index)
            continue
        call_id = block.get("tool_use_id")
        if role != "user" or not isinstance(call_id, str):
            kind: ProblemKind = "misplaced_block" if role != "user" else "orphaned_result"
            problems.append(WireProblem(kind=kind, message=index, detail=f"tool_result in {role}"))
            continue
        if index in other_seen:
            problems.append(WireProblem(kind="result_not_first", message=index, detail=call_id))
        owner = index - 1 if index > 0 and messages[index - 1].get("role") == "assistant" else None
        problems.extend(_result_problem(call_id, index, owner, calls, answered))
    return problems + _unanswered(calls, answered)


def check_anthropic_structure(payload: dict[str, Any]) -> list[WireProblem]:
    """Return the structural problems of a Messages payload that the API rejects.

    Checked: at least one message, the first a user message, roles alternating, no empty content
    (except a final assistant message), no blank text block (messages and system), content on an
    error ``tool_result``, and at most ``MAX_CACHE_BREAKPOINTS`` ``cache_control`` blocks.

    Args:
        payload: A dict as ``to_anthropic`` returns it.

    Returns:
        Problems in order; empty when the structure is valid.
    """
    messages: list[Any] = payload.get("messages", [])
    problems: list[WireProblem] = []
    if not messages or messages[0].get("role") != "user":
        problems.append(WireProblem(kind="first_not_user", message=0))
    for index, message in enumerate(messages):
        if index > 0 and message.get("role") == messages[index - 1].get("role"):
            problems.append(WireProblem(kind="roles_not_alternating", message=index))
        content = message.get("content")
        final_assistant = index == len(messages) - 1 and message.get("role") == "assistant"
        if not content and not final_assistant:
            problems.append(WireProblem(kind="empty_content", message=index))
        if isinstance(content, str) and content and is_blank(content):
            problems.append(WireProblem(kind="blank_text", message=index))
    for index, _, block in _blocks(messages):
        if block.get("type") == "text" and is_blank(str(block.get("text", ""))):
            problems.append(WireProblem(kind="blank_text", message=index))
        if block.get("type") == "tool_result" and block.get("is_error") and not block.get("content"):
            problems.append(WireProblem(kind="empty_content", message=index, detail="error tool_result"))
    problems.extend(
        WireProblem(kind="blank_text", message=-1, detail="system")
        for block in payload.get("system") or ()
        if isinstance(block, dict) and is_blank(str(block.get("text", "")))
    )
    parts = [
        *(payload.get("system") or ()),
        *(payload.get("tools") or ()),
        *(b for _, _, b in _blocks(messages)),
    ]
    breakpoints = sum(1 for part in parts if isinstance(part, dict) and part.get("cache_control"))
    if breakpoints > MAX_CACHE_BREAKPOINTS:
        problems.append(WireProblem(kind="too_many_breakpoints", message=-1, detail=str(breakpoints)))
    return problems


def _blocks(messages: list[Any]) -> Iterator[tuple[int, str, dict[str, Any]]]:
    for index, message in enumerate(messages):
        content = message.get("content")
        if isinstance(content, list):
            role = str(message.get("role"))
            for block in content:
                if isinstance(block, dict):
                    yield index, role, block


def _register_calls(ids: list[Any], index: int, calls: dict[str, int]) -> list[WireProblem]:
    """Record the call ids of the assistant message at ``index``; report missing and reused ids."""
    problems: list[WireProblem] = []
    for call_id in ids:
        if not isinstance(call_id, str):
            problems.append(WireProblem(kind="malformed", message=index, detail="tool call without id"))
        elif call_id in calls:
            problems.append(WireProblem(kind="duplicate_call", message=index, detail=call_id))
        else:
            calls[call_id] = index
    return problems


def _unanswered(calls: dict[str, int], answered: dict[str, int] | set[str]) -> list[WireProblem]:
    return [
        WireProblem(kind="orphaned_call", message=at, detail=call_id)
        for call_id, at in calls.items()
        if call_id not in answered
    ]


def _result_problem(
    call_id: str, index: int, owner: int | None, calls: dict[str, int], answered: dict[str, int]
) -> list[WireProblem]:
    """Classify one result: duplicate, orphaned, before its call, or not right after its call."""
    if call_id in answered:
        return [WireProblem(kind="duplicate_result", message=index, detail=call_id)]
    answered[call_id] = index
    at = calls.get(call_id)
    if at is None:
        del answered[call_id]
        return [WireProblem(kind="orphaned_result", message=index, detail=call_id)]
    if at > index:
        return [WireProblem(kind="result_before_call", message=index, detail=call_id)]
    if at != owner:
        return [WireProblem(kind="result_not_adjacent", message=index, detail=call_id)]
    return []
