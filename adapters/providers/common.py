"""Helpers shared by the provider shapes: plain dicts from SDK objects, token counts from usage."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from contextledger.application.kernel.wire_shapes import as_plain, ledger_tool_schema
from contextledger.domain.errors import InvalidMessageError
from contextledger.domain.limits import MAX_STORED_INT

__all__ = ["check_tool_names", "count", "mapping", "part_text", "reply_dict"]

_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""A tool name both APIs accept (Chat Completions, Responses and Messages: ``^[a-zA-Z0-9_-]{1,64}$``)."""


def check_tool_names(tools: Iterable[object]) -> None:
    """Refuse a tool whose name the provider APIs refuse, before any session is started.

    An MCP tool named ``fs.read`` (MCP allows dots) was sent as it was, and the first model call got a
    400 back. The error names the tool and a name the APIs take.

    Raises:
        InvalidMessageError: a tool name with a character outside ``A-Z a-z 0-9 _ -``, or over 64 of them.
    """
    for tool in tools:
        name = ledger_tool_schema(tool).get("name") if isinstance(tool, dict) else getattr(tool, "name", None)
        if isinstance(name, str) and not _TOOL_NAME.fullmatch(name):
            suggested = re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64] or "tool"
            msg = (
                f"tool name {name!r} is refused by the model APIs (letters, digits, _ and -, 1 to 64 "
                f"characters): name it {suggested!r}, for instance"
            )
            raise InvalidMessageError(msg)


def reply_dict(response: object, what: str) -> dict[str, Any]:
    """Return a reply (SDK object or dict) as a dict; raise ``InvalidMessageError`` otherwise."""
    plain = as_plain(response)
    if not isinstance(plain, dict):
        msg = f"a {what} reply must be the SDK's response object or its dict, not {type(response).__name__}"
        raise InvalidMessageError(msg)
    return plain


def mapping(value: object) -> dict[str, Any]:
    """Return ``value`` if it is a dict, else an empty one (a usage part the provider left out)."""
    return value if isinstance(value, dict) else {}


def count(value: object) -> int | None:
    """Return a token count, or None when the provider gave none.

    Raises:
        InvalidMessageError: a negative count, or one no store keeps (above ``MAX_STORED_INT``): the reply is
            refused before anything of it is written.
    """
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    if not 0 <= value <= MAX_STORED_INT:
        msg = f"a usage token count must be between 0 and {MAX_STORED_INT}, not {value}; nothing was written"
        raise InvalidMessageError(msg)
    return value


def part_text(part: dict[str, Any]) -> str:
    """The text of a Responses message part: an ``output_text``'s, or a ``refusal``'s (the model's answer)."""
    if part.get("type") == "refusal":
        return str(part.get("refusal", ""))
    return str(part.get("text", ""))
