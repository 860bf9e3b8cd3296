"""Helpers shared by the provider shapes: plain dicts from SDK objects, token counts from usage."""

from __future__ import annotations

from typing import Any

from contextledger.application.kernel.wire_shapes import as_plain
from contextledger.domain.errors import InvalidMessageError

__all__ = ["count", "mapping", "reply_dict"]


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
    """Return a token count, or None when the provider gave none."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None
