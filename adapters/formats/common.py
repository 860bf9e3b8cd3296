"""Rules shared by the wire formats: which wire role a neutral message takes, and id rewriting."""

from __future__ import annotations

from typing import Literal

from contextledger.domain.errors import InvalidMessageError
from contextledger.projections.context import RenderedMessage
from contextledger.projections.wire import object_schema, rewrite_id

__all__ = ["USER_TEXT_KINDS", "WireRole", "is_blank", "object_schema", "rewrite_id", "wire_role"]

WireRole = Literal["user", "assistant", "tool"]

USER_TEXT_KINDS = frozenset({"summary", "injection"})
"""Kinds always sent as user-role text, whatever role the neutral message names.

A summary (the stable prefix) and injected per-turn content (retrieved memories) are context the
caller supplies, not something the model said, and must not gain system authority: a summary can
quote tool output or user text verbatim. A user-role text message is valid at the head of the
history in both APIs (Anthropic requires the first message to be a user message) and is cacheable.
"""


def wire_role(message: RenderedMessage, index: int) -> WireRole:
    """Return the role ``message`` takes on the wire, refusing shapes no provider can express.

    Args:
        message: A message of ``RenderedContext.messages``.
        index: Its index there, for the error message.

    Returns:
        ``"user"`` for summaries and injections, else the message's own role.

    Raises:
        InvalidMessageError: Tool calls outside an assistant message, a tool result without
            ``tool_call_id``, or a call id on a message that is not a tool result.
    """
    role: WireRole = "user" if message.kind in USER_TEXT_KINDS else message.role
    if message.tool_calls and role != "assistant":
        raise InvalidMessageError(
            f"messages[{index}]: a {message.kind} {role} message cannot carry tool calls"
        )
    if role == "tool" and not message.tool_call_id:
        raise InvalidMessageError(f"messages[{index}]: a tool result needs a tool_call_id")
    if role != "tool" and message.tool_call_id is not None:
        raise InvalidMessageError(
            f"messages[{index}]: only a tool result may carry a tool_call_id ({message.kind} {role} does)"
        )
    return role


def is_blank(text: str) -> bool:
    """Return whether ``text`` is empty or whitespace only (Anthropic rejects such text blocks)."""
    return not text.strip()
