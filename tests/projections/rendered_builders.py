"""Neutral rendered contexts for tests: messages, contexts and one rich context with every kind of block."""

from __future__ import annotations

from typing import Any

import pytest
from contextledger.domain.events import ToolSchema
from contextledger.projections.context import RenderedContext, RenderedMessage, RenderedToolCall


def message(role: str, text: str = "", **fields: Any) -> RenderedMessage:
    """A neutral message with a token count derived from its text."""
    return RenderedMessage(role=role, text=text, tokens=len(text) // 4 + 4, **fields)  # type: ignore[arg-type]


def context(messages: list[RenderedMessage], *, stable_prefix: int = 0, **fields: Any) -> RenderedContext:
    """A neutral context around ``messages`` with consistent token totals."""
    system = fields.pop("system", "You are a careful coding agent.")
    tools = fields.pop("tools", (ToolSchema(name="read_file", description="Read a file.", parameters={}),))
    total = len(system) // 4 + 10 * len(tools) + sum(m.tokens for m in messages)
    base: dict[str, Any] = {
        "session_id": "s-1",
        "position": 42,
        "policy": "default",
        "tokenizer": "cl100k_base",
        "system": system,
        "system_tokens": len(system) // 4,
        "tools": tools,
        "tools_tokens": 10 * len(tools),
        "messages": tuple(messages),
        "stable_prefix": stable_prefix,
        "tokens": total,
        "budget": 32_000,
    }
    return RenderedContext(**(base | fields))


@pytest.fixture
def rich_context() -> RenderedContext:
    """Pinned task, summary (stable prefix), parallel calls, an error, a stub, non-JSON args, an injection."""
    calls = (
        RenderedToolCall(id="call_1", name="read_file", arguments='{"path": "a.py"}'),
        RenderedToolCall(id="call_2", name="grep", arguments="not json {"),
    )
    return context(
        [
            message("user", "Fix the failing test in a.py."),
            message("user", "[summary] Earlier we looked at b.py.", kind="summary", sources=(3, 4, 5)),
            message("user", "Go on."),
            message("assistant", "Reading both.", tool_calls=calls),
            message("tool", "def f(): ...", tool_call_id="call_1", tool_name="read_file"),
            message("tool", "grep: bad regex", tool_call_id="call_2", tool_name="grep", is_error=True),
            message("assistant", tool_calls=(RenderedToolCall(id="call_3", name="ls", arguments="[1, 2]"),)),
            message(
                "tool",
                "[result expired: ls call_3, 4,812 tokens; restore: seq 1234]",
                kind="stub",
                tool_call_id="call_3",
                tool_name="ls",
            ),
            message("user", "Memory: the user prefers pytest.", kind="injection"),
        ],
        stable_prefix=2,
        tools=(
            ToolSchema(name="read_file", description="Read a file.", parameters={"type": "object"}),
            ToolSchema(name="grep", parameters={"properties": {"pattern": {"type": "string"}}}),
            ToolSchema(name="ls"),
        ),
    )


class Neutral:
    """Builders of neutral messages and contexts, handed to tests as the ``neutral`` fixture."""

    message = staticmethod(message)
    context = staticmethod(context)
    call = RenderedToolCall


@pytest.fixture(scope="session")
def neutral() -> type[Neutral]:
    """Builders of neutral messages (``message``), contexts (``context``) and calls (``call``)."""
    return Neutral
