"""Image and file parts on each wire: a message's text and parts as its provider's content list.

The same part renders back exactly as it came on its own wire (a ``data:`` URL is rebuilt from the
media type and the base64 data; keys in the provider's documented order), and is converted on the
others. A combination a wire cannot express (a file at a URL on Chat Completions) is sent as a text
part naming it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from contextledger.domain.content import InlineText, MediaPart
from contextledger.domain.errors import ValidationError

__all__ = ["anthropic_part", "chat_part", "data_url", "media_content", "responses_part"]


def data_url(media_type: str | None, data: str) -> str:
    """Return the ``data:`` URL OpenAI's wires carry for base64 bytes."""
    return f"data:{media_type or 'application/octet-stream'};base64,{data}"


def _data(part: MediaPart) -> str:
    if isinstance(part.data, InlineText):
        return part.data.text
    msg = f"the data of media part {part.sha256[:12]} must be read before it is rendered"
    raise ValidationError(msg)


def chat_part(part: MediaPart) -> dict[str, Any]:
    """Return the Chat Completions part: ``image_url`` for images, ``file`` for files."""
    data = _data(part)
    if part.kind == "image" and part.source != "file_id":
        url = data_url(part.media_type, data) if part.source == "base64" else data
        image: dict[str, Any] = {"url": url}
        if part.detail is not None:
            image["detail"] = part.detail
        return {"type": "image_url", "image_url": image}
    if part.source == "url":
        return {"type": "text", "text": f"[{part.kind}: {data}]"}
    file: dict[str, Any] = (
        {"file_id": data} if part.source == "file_id" else {"file_data": data_url(part.media_type, data)}
    )
    if part.filename is not None:
        file["filename"] = part.filename
    return {"type": "file", "file": file}


def responses_part(part: MediaPart) -> dict[str, Any]:
    """Return the Responses part: ``input_image`` (its ``detail`` ``auto`` if none) or ``input_file``."""
    data = _data(part)
    if part.kind == "image":
        out: dict[str, Any] = {"type": "input_image"}
        if part.source == "file_id":
            out["file_id"] = data
        else:
            out["image_url"] = data_url(part.media_type, data) if part.source == "base64" else data
        out["detail"] = part.detail or "auto"
        return out
    out = {"type": "input_file"}
    if part.source == "file_id":
        out["file_id"] = data
    elif part.source == "url":
        out["file_url"] = data
    else:
        out["file_data"] = data_url(part.media_type, data)
    if part.filename is not None:
        out["filename"] = part.filename
    return out


def anthropic_part(part: MediaPart) -> dict[str, Any]:
    """Return the Messages block: ``image`` or ``document`` with a base64, url or file source."""
    data = _data(part)
    if part.source == "base64":
        source: dict[str, Any] = {"type": "base64", "media_type": part.media_type, "data": data}
    elif part.source == "url":
        source = {"type": "url", "url": data}
    else:
        source = {"type": "file", "file_id": data}
    block: dict[str, Any] = {"type": "image" if part.kind == "image" else "document", "source": source}
    if part.kind == "file" and part.filename is not None:
        block["title"] = part.filename
    return block


def media_content(
    text: str,
    media: tuple[MediaPart, ...],
    text_part: Callable[[str], dict[str, Any]],
    media_part: Callable[[MediaPart], dict[str, Any]],
) -> list[dict[str, Any]]:
    """Return the text and parts in order: the text cut at each part's ``offset``, blank pieces left out."""
    out: list[dict[str, Any]] = []
    at = 0
    for part in media:
        cut = min(max(part.offset, at), len(text))
        if text[at:cut].strip():
            out.append(text_part(text[at:cut]))
        out.append(media_part(part))
        at = cut
    if text[at:].strip():
        out.append(text_part(text[at:]))
    return out
