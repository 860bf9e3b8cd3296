"""Message text held inline in an event, or by content address when it is large."""

from __future__ import annotations

import hashlib

import msgspec

__all__ = ["BlobText", "InlineText", "Text", "content_address", "text_chars", "text_preview"]

PREVIEW_CHARS = 200
"""How many leading characters of a large text the event itself keeps as a preview."""


class InlineText(msgspec.Struct, frozen=True, tag="inline"):
    """Text stored inside the event payload."""

    text: str


class BlobText(msgspec.Struct, frozen=True, tag="blob"):
    """Text stored once, content-addressed by SHA-256, outside the event payload.

    Replays decode only this reference; the text is read when something needs it.
    """

    sha256: str
    chars: int
    preview: str


Text = InlineText | BlobText
"""A message body: inline for ordinary sizes, a blob reference for large ones."""


def text_chars(text: Text) -> int:
    """Return the length in characters of the full text."""
    return len(text.text) if isinstance(text, InlineText) else text.chars


def text_preview(text: Text, limit: int = PREVIEW_CHARS) -> str:
    """Return at most ``limit`` leading characters of the text without reading a blob."""
    return text.text[:limit] if isinstance(text, InlineText) else text.preview[:limit]


def content_address(text: str) -> str:
    """Return the content address of a text: the SHA-256 of its UTF-8 bytes, in hex.

    The one definition: blobs are stored under it and token counts are cached under it, so a blob's
    count is found by its address without reading the blob.
    """
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
