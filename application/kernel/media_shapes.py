"""Image and file parts at the boundary: each provider's part as the ledger's media shape.

Accepted parts, in a user message's content list:

- OpenAI Chat: ``{"type": "image_url", "image_url": {"url", "detail"?}}`` (a ``data:`` URL or a web
  URL) and ``{"type": "file", "file": {"file_data" (a ``data:`` URL) | "file_id", "filename"?}}``;
- OpenAI Responses: ``{"type": "input_image", "image_url" | "file_id", "detail"?}`` and
  ``{"type": "input_file", "file_data" | "file_id" | "file_url", "filename"?}``;
- Anthropic: ``{"type": "image" | "document", "source": {"type": "base64", "media_type", "data"} |
  {"type": "url", "url"} | {"type": "file", "file_id"}, "title"?}``;
- LangChain's standard blocks: ``{"type": "image" | "file", "base64" | "data" | "url" | "file_id",
  "mime_type"?, "source_type"?, "filename"?}``.

The ledger's shape is ``{"kind", "source", "data", "media_type"?, "detail"?, "filename"?, "offset"}``
(see ``domain.content.MediaPart``); ``offset`` is the length of the message text before the part.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from contextledger.domain.errors import InvalidMessageError

__all__ = ["MEDIA_PARTS", "ledger_media"]

MEDIA_PARTS = frozenset({"image_url", "file", "input_image", "input_file", "image", "document"})
"""Part types read as an image or a file."""

_DATA_URL = re.compile(r"data:([A-Za-z0-9.+/-]+);base64,(.*)", re.DOTALL)


def _fail(what: str) -> InvalidMessageError:
    return InvalidMessageError(f"media part: {what}")


def _from_url(kind: str, url: object, extra: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(url, str) or not url:
        raise _fail(f"an {kind} needs a URL or data (text)")
    match = _DATA_URL.fullmatch(url)
    if match:
        return {
            "kind": kind,
            "source": "base64",
            "data": match.group(2),
            "media_type": match.group(1),
            **extra,
        }
    return {"kind": kind, "source": "url", "data": url, **extra}


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _anthropic(part: Mapping[str, Any], kind: str) -> dict[str, Any]:
    source = part["source"]
    if not isinstance(source, Mapping):
        raise _fail("an Anthropic source must be an object")
    extra = {"filename": part["title"]} if isinstance(part.get("title"), str) else {}
    kind_of = source.get("type")
    if kind_of == "base64":
        out = {"kind": kind, "source": "base64", "data": source.get("data"), **extra}
        return {**out, "media_type": source.get("media_type")}
    if kind_of == "url":
        return {"kind": kind, "source": "url", "data": source.get("url"), **extra}
    if kind_of == "file":
        return {"kind": kind, "source": "file_id", "data": source.get("file_id"), **extra}
    raise _fail(f"an Anthropic {part.get('type')} source of type {kind_of!r} is not accepted")


def _langchain(part: Mapping[str, Any], kind: str) -> dict[str, Any]:
    extra: dict[str, Any] = {"media_type": _str(part.get("mime_type"))}
    if isinstance(part.get("filename"), str):
        extra["filename"] = part["filename"]
    source_type = part.get("source_type")
    data = part.get("base64") if "base64" in part else part.get("data")
    if source_type == "url" or (source_type is None and "url" in part and data is None):
        url = part.get("url") if "url" in part else data
        return {**_from_url(kind, url, {}), **{k: v for k, v in extra.items() if v is not None}}
    if source_type == "id" or "file_id" in part or "id" in part:
        return {"kind": kind, "source": "file_id", "data": part.get("file_id", part.get("id")), **extra}
    return {"kind": kind, "source": "base64", "data": data, **extra}


def _part(part: Mapping[str, Any]) -> dict[str, Any]:  # noqa: PLR0911 - one shape per provider
    kind = part.get("type")
    if kind == "image_url":
        image = part.get("image_url")
        url, detail = (image.get("url"), image.get("detail")) if isinstance(image, Mapping) else (image, None)
        return _from_url("image", url, {"detail": detail} if detail is not None else {})
    if kind == "input_image":
        extra = {"detail": part["detail"]} if part.get("detail") is not None else {}
        if part.get("file_id") is not None:
            return {"kind": "image", "source": "file_id", "data": part["file_id"], **extra}
        return _from_url("image", part.get("image_url"), extra)
    if kind == "file" and isinstance(part.get("file"), Mapping):
        return _openai_file(part["file"])
    if kind == "input_file":
        if part.get("file_url") is not None:
            return _from_url("file", part["file_url"], _named(part))
        return _openai_file(part)
    if kind in ("image", "document") and "source" in part:
        return _anthropic(part, "image" if kind == "image" else "file")
    if kind in ("image", "file"):
        return _langchain(part, kind)
    raise _fail(f"a {kind!r} part is not accepted")


def _named(part: Mapping[str, Any]) -> dict[str, Any]:
    return {"filename": part["filename"]} if isinstance(part.get("filename"), str) else {}


def _openai_file(file: Mapping[str, Any]) -> dict[str, Any]:
    if file.get("file_id") is not None:
        return {"kind": "file", "source": "file_id", "data": file["file_id"], **_named(file)}
    return _from_url("file", file.get("file_data"), _named(file))


def ledger_media(part: Mapping[str, Any], offset: int) -> dict[str, Any]:
    """Return one image or file part (any shape above) as the ledger's media dict at ``offset``.

    Raises:
        InvalidMessageError: A part type or source none of the providers defines, or no data.
    """
    out = _part(part)
    if not isinstance(out.get("data"), str) or not out["data"]:
        raise _fail(f"a {part.get('type')!r} part needs its data, URL or file id as text")
    return {**{k: v for k, v in out.items() if v is not None}, "offset": offset}
