"""Recognise a transcript's format from its content (the file name is only a last hint)."""

from __future__ import annotations

import re
from typing import Any

from contextledger.adapters.importers.source import Source

__all__ = ["detect_format"]

_AIDER = re.compile(rb"^# aider chat started at \d{4}-\d{2}-\d{2}", re.MULTILINE)
_CLAUDE_TYPES = {"user", "assistant", "system", "summary", "file-history-snapshot", "queue-operation"}
_ANTHROPIC_BLOCKS = {"tool_use", "tool_result", "thinking", "redacted_thinking"}
_PEEK = 50


def _anthropic_messages(messages: Any) -> bool:
    """Return True when messages use Anthropic-only content blocks (OpenAI uses tool_calls / role tool)."""
    if not isinstance(messages, list):
        return False
    for message in messages[:_PEEK]:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") in _ANTHROPIC_BLOCKS for b in content
        ):
            return True
    return False


def _chat_flavour(value: dict[str, Any]) -> str:
    """Tell an Anthropic request from an OpenAI one."""
    if "anthropic_version" in value or isinstance(value.get("system"), str | list):
        return "anthropic"
    tools = value.get("tools")
    if isinstance(tools, list) and any(isinstance(t, dict) and "input_schema" in t for t in tools):
        return "anthropic"
    return "anthropic" if _anthropic_messages(value.get("messages")) else "openai"


def _mini_swe_agent(value: dict[str, Any]) -> bool:
    marker = value.get("trajectory_format")
    info = value.get("info")
    if isinstance(marker, str) and marker.startswith("mini-swe-agent"):
        return True
    return "messages" in value and isinstance(info, dict) and "mini_version" in info


def _swe_agent(value: dict[str, Any]) -> bool:
    """A SWE-agent ``.traj``: ``history`` and ``trajectory``, or ``history`` of SWE-agent's entries alone."""
    history = value.get("history")
    if not isinstance(history, list):
        return False
    if "trajectory" in value:
        return True
    first = history[0] if history else None
    return isinstance(first, dict) and "role" in first and "message_type" in first


def _of_object(value: dict[str, Any]) -> str | None:
    if _mini_swe_agent(value):
        return "mini-swe-agent"
    if _swe_agent(value):
        return "swe-agent"
    if isinstance(value.get("history"), list) and value["history"] and _of_event(value["history"][0]):
        return "openhands"
    if "fncall_messages" in value:
        return "openai"
    if isinstance(value.get("messages"), list):
        return _chat_flavour(value)
    return None


def _of_event(value: Any) -> bool:
    return isinstance(value, dict) and "id" in value and ("action" in value or "observation" in value)


def _of_array(values: list[Any]) -> str | None:
    first = values[0] if values else None
    if not isinstance(first, dict):
        return None
    if "traj" in first and "task_id" in first:
        return "tau-bench"
    if _of_event(first):
        return "openhands"
    if "role" in first:
        return "anthropic" if _anthropic_messages(values) else "openai"
    return _of_object(first)


def _of_lines(source: Source) -> str | None:
    rows = []
    for _, value in source.lines():
        rows.append(value)
        if len(rows) >= _PEEK:
            break
    for value in rows:
        if not isinstance(value, dict):
            return None
        if value.get("type") in _CLAUDE_TYPES and (  # a resumed session opens with summaries: leafUuid
            "sessionId" in value or "uuid" in value or "messageId" in value or "leafUuid" in value
        ):
            return "claude-code"
    first = rows[0]
    if "role" in first:
        return "anthropic" if _anthropic_messages(rows) else "openai"
    return _of_object(first)


def detect_format(source: Source) -> str:
    """Return the format name of ``source`` judged by its content.

    Raises:
        TranscriptImportError: the content matches no known format (the message says what was seen).
    """
    stripped = source.data.lstrip(b" \t\r\n")
    line = source.data[: len(source.data) - len(stripped)].count(b"\n") + 1
    found: str | None
    if not stripped[:1] or stripped[:1] not in b"[{":
        source.text  # noqa: B018 - an undecodable byte is reported by line and column first
        if _AIDER.search(source.data):
            return "aider"
        found = None
        seen = "an empty file" if not stripped else "text that is neither JSON nor an Aider chat history"
    elif source.looks_like_json_lines():
        found = _of_lines(source)
        seen = "JSON Lines of unknown records"
    elif source.is_array:  # only the first elements are decoded: an array streams when parsed
        found = _of_array([source.element(raw) for raw in source.elements[:_PEEK]])
        seen = "a JSON array of unknown shape"
    else:
        document = source.document
        found = _of_object(document)
        seen = "a JSON object of unknown shape"
    if found is None:
        raise source.error(
            f"line {line}",
            f"cannot detect the transcript format: expected JSON, JSON Lines or an Aider history "
            f"('# aider chat started at <time>'), found {seen}; or pass --format "
            "(openai, anthropic, claude-code, swe-agent, mini-swe-agent, openhands, aider, tau-bench)",
        )
    return found
