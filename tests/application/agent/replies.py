"""Provider replies as dicts for the agent-loop tests: an Anthropic Messages one, an OpenAI Responses one."""

from __future__ import annotations

from typing import Any

__all__ = ["messages_reply", "responses_reply"]


def messages_reply(turn: int, content: list[dict[str, Any]]) -> dict[str, Any]:
    """A Messages API reply of ``content`` blocks, stopped for tool use."""
    return {
        "id": f"msg_{turn}",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 1, "output_tokens": 1},
        "content": content,
    }


def responses_reply(output: list[dict[str, Any]]) -> dict[str, Any]:
    """A completed Responses API reply of ``output`` items."""
    return {
        "id": "resp_1",
        "object": "response",
        "model": "o4-mini",
        "status": "completed",
        "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
        "output": output,
    }
