"""Message text held inline in an event, or by content address when it is large."""

from __future__ import annotations

import hashlib
from typing import Literal

import msgspec

__all__ = [
    "BlobText",
    "InlineText",
    "MediaKind",
    "MediaPart",
    "MediaSource",
    "Text",
    "content_address",
    "text_chars",
    "text_preview",
]

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


MediaKind = Literal["image", "file"]
"""An image (PNG, JPEG, GIF, WebP) or a file (a PDF, a text document)."""

MediaSource = Literal["base64", "url", "file_id"]
"""Where a part's bytes are: inline (``data`` is base64), at a URL, or a provider's uploaded file id."""


class MediaPart(msgspec.Struct, frozen=True, kw_only=True):
    """An image or file part of a message, provider-neutral; ``data`` is stored like a message text.

    ``data`` is the base64 payload, the URL or the file id (a large payload is a content-addressed
    blob, like a large text); ``sha256`` is its content address, so stubs and recalls name it without
    reading it. ``offset`` is how many characters of the message text come before the part, so text
    and parts render back in their order. ``width``/``height`` (pixels) and ``pages`` are read from
    the bytes when they are inline, for the token estimate; None when unknown.
    """

    kind: MediaKind
    source: MediaSource
    data: Text
    sha256: str
    media_type: str | None = None
    detail: str | None = None
    filename: str | None = None
    width: int | None = None
    height: int | None = None
    pages: int | None = None
    offset: int = 0


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
