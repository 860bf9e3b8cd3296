"""pydantic-ai's multi-part user prompts with the ledger: images and documents in, and back out of a wire."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Any

from contextledger.application.kernel.media_shapes import MEDIA_PARTS, ledger_media
from pydantic_ai.messages import BinaryContent, DocumentUrl, ImageUrl, UserContent

__all__ = ["prompt_message", "prompt_of"]


def prompt_message(content: Sequence[Any], meta: dict[str, Any]) -> dict[str, Any]:
    """A ``UserPromptPart``'s content list as a ledger user message: its texts, and its images and files.

    ``BinaryContent`` (an image or a document) is kept as base64 bytes, ``ImageUrl`` and
    ``DocumentUrl`` as URLs; texts are joined by newlines. Audio and video are not kept.
    """
    texts: list[str] = []
    media: list[dict[str, Any]] = []
    chars = 0
    for item in content:
        if isinstance(item, str):
            chars += len(item) + (1 if texts else 0)
            texts.append(item)
        elif isinstance(item, BinaryContent) and (item.is_image or item.is_document):
            data = base64.b64encode(item.data).decode("ascii")
            kind = "image" if item.is_image else "file"
            media.append(
                {
                    "kind": kind,
                    "source": "base64",
                    "data": data,
                    "media_type": item.media_type,
                    "offset": chars,
                }
            )
        elif isinstance(item, ImageUrl | DocumentUrl):
            kind = "image" if isinstance(item, ImageUrl) else "file"
            media.append({"kind": kind, "source": "url", "data": item.url, "offset": chars})
    message: dict[str, Any] = {"role": "user", "content": "\n".join(texts), "meta": meta}
    if media:
        message["media"] = media
    return message


def prompt_of(parts: list[dict[str, Any]], text_of: Any) -> str | list[UserContent]:
    """A rendered user message's content (any wire's parts) as a ``UserPromptPart`` content."""
    if not any(isinstance(p, dict) and p.get("type") in MEDIA_PARTS for p in parts):
        return str(text_of(parts))
    out: list[UserContent] = []
    for part in parts:
        if part.get("type") not in MEDIA_PARTS:
            out.append(str(text_of([part])))
            continue
        media = ledger_media(part, 0)
        out.append(_content(media))
    return out


def _content(media: dict[str, Any]) -> UserContent:
    data = str(media["data"])
    if media["source"] == "base64":
        try:
            raw = base64.b64decode(data)
        except (binascii.Error, ValueError):
            raw = data.encode()
        return BinaryContent(data=raw, media_type=str(media.get("media_type") or "application/octet-stream"))
    if media["source"] == "url":
        return ImageUrl(url=data) if media["kind"] == "image" else DocumentUrl(url=data)
    return f"[{media['kind']}: {data}]"
