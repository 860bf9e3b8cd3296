"""The strict server's rules for content beyond text: image and file parts, hosted tool items.

Parts are counted by each provider's documented estimate, computed here from the bytes sent (not by
contextledger): OpenAI's tiles (85, or 85 + 170 per 512-pixel tile after scaling to 2048 then 768),
Anthropic's ``width * height / 750`` (long side at most 1568), 1,600 for an image whose size cannot
be read, 4,600 per PDF page (3,000 of text and the page as an image); the part's other JSON is
counted as text. Parts are refused where the real APIs refuse them (a media type they do not take,
data that is not base64, an image outside a user message). Hosted items (a ``web_search_call``, an
Anthropic ``server_tool_use`` and its result) must come back exactly as issued, a reasoning item
with the item that followed it (Responses), and a tool-use turn with its server blocks (Messages).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import struct
from collections.abc import Callable
from typing import Any

ANTHROPIC_IMAGE_TYPES = {"image/jpeg", "image/png", "image/gif", "image/webp"}
OPENAI_DATA_IMAGE = re.compile(r"data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=]*")
UNKNOWN_IMAGE = 1_600
PDF_PAGE = 4_600
UNKNOWN_PAGES = 10
MEDIA_TYPES = {"image_url", "file", "input_image", "input_file", "image", "document"}


def _b64(data: str) -> bytes | None:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


def png_size(data: str) -> tuple[int, int] | None:
    """Width and height of a base64 PNG (the only images the tests send inline), else None."""
    raw = _b64(data[:64])
    if raw is None or not raw.startswith(b"\x89PNG\r\n\x1a\n"):
        return None
    width, height = struct.unpack(">II", raw[16:24])
    return width, height


def pages(data: str) -> int:
    """Pages of a base64 PDF (its page objects), or ``UNKNOWN_PAGES``."""
    raw = _b64(data) or b""
    return len(re.findall(rb"/Type\s*/Page(?![A-Za-z])", raw)) or UNKNOWN_PAGES


def openai_image(size: tuple[int, int] | None, detail: str | None) -> int:
    """OpenAI's documented image cost."""
    if detail == "low":
        return 85
    if size is None:
        return UNKNOWN_IMAGE
    w, h = size
    if max(w, h) > 2048:
        w, h = w * 2048 / max(w, h), h * 2048 / max(w, h)
    if min(w, h) > 768:
        w, h = w * 768 / min(w, h), h * 768 / min(w, h)
    return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)


def anthropic_image(size: tuple[int, int] | None) -> int:
    """Anthropic's documented image cost."""
    if size is None:
        return UNKNOWN_IMAGE
    w, h = size
    if max(w, h) > 1568:
        w, h = w * 1568 / max(w, h), h * 1568 / max(w, h)
    return min(math.ceil(w * h / 750), UNKNOWN_IMAGE)


def _inline(url: str | None) -> str | None:
    if url and url.startswith("data:") and ";base64," in url:
        return url.split(";base64,", 1)[1]
    return None


def part_estimate(part: dict[str, Any]) -> int:
    """The documented estimate of one media part on its own wire."""
    kind = part["type"]
    if kind == "image_url":
        data = _inline(part["image_url"]["url"])
        return openai_image(png_size(data) if data else None, part["image_url"].get("detail"))
    if kind == "input_image":
        data = _inline(part.get("image_url"))
        return openai_image(png_size(data) if data else None, part.get("detail"))
    if kind == "image":
        source = part["source"]
        return anthropic_image(png_size(source["data"]) if source["type"] == "base64" else None)
    if kind == "document":
        source = part["source"]
        return PDF_PAGE * (pages(source["data"]) if source["type"] == "base64" else UNKNOWN_PAGES)
    data = _inline(part["file"].get("file_data") if kind == "file" else part.get("file_data"))
    return PDF_PAGE * (pages(data) if data else UNKNOWN_PAGES)


def _stripped(part: dict[str, Any]) -> dict[str, Any]:
    """The part without its bytes (what is counted as text)."""
    out = json.loads(json.dumps(part))
    for holder in (out, out.get("image_url"), out.get("file"), out.get("source")):
        if isinstance(holder, dict):
            for key in ("url", "image_url", "file_data", "data"):
                if isinstance(holder.get(key), str) and holder[key].startswith(("data:", "iVBOR", "JVBER")):
                    holder[key] = ""
    return out


def count_parts(content: list[dict[str, Any]], tokens: Callable[[str], int]) -> int:
    """Tokens of a content list: text as text, media by estimate, the rest of each part as JSON."""
    total = 0
    for part in content:
        if part.get("type") in MEDIA_TYPES:
            total += part_estimate(part) + tokens(json.dumps(_stripped(part), separators=(",", ":")))
        else:
            texts = {k: v for k, v in part.items() if k in ("text", "content") and isinstance(v, str)}
            rest = {k: v for k, v in part.items() if k not in texts}
            total += sum(tokens(v) for v in texts.values())
            total += tokens(json.dumps(rest, ensure_ascii=False, separators=(",", ":")))
    return total


def check_chat_parts(messages: list[dict[str, Any]]) -> list[str]:
    """Chat: image and file parts only in user messages, valid data URLs or web URLs, known detail."""
    problems: list[str] = []
    for message in messages:
        content = message.get("content")
        for part in content if isinstance(content, list) else []:
            kind = part.get("type")
            if kind in ("image_url", "file") and message["role"] != "user":
                problems.append(f"{kind} parts are only allowed in user messages")
            if kind == "image_url":
                url = part["image_url"]["url"]
                if not (OPENAI_DATA_IMAGE.fullmatch(url) or url.startswith(("http://", "https://"))):
                    problems.append("Invalid image URL: expected a base64 data URL of an image or a web URL")
                if part["image_url"].get("detail", "auto") not in ("low", "high", "auto"):
                    problems.append("invalid image detail")
            if kind == "file" and not (part["file"].get("file_id") or _inline(part["file"].get("file_data"))):
                problems.append("a file part needs file_data (a base64 data URL) or file_id")
    return problems


def check_responses_parts(items: list[dict[str, Any]]) -> list[str]:
    """Responses: input_image with a valid URL and detail, input_file with data, URL or id."""
    problems: list[str] = []
    for item in items:
        content = item.get("content")
        for part in content if isinstance(content, list) else []:
            if part.get("type") == "input_image":
                url = part.get("image_url") or ""
                if not (OPENAI_DATA_IMAGE.fullmatch(url) or url.startswith("http") or part.get("file_id")):
                    problems.append("Invalid input_image: image_url must be a data URL or web URL")
                if part.get("detail") not in ("low", "high", "auto"):
                    problems.append("Missing required parameter: input_image.detail")
            if part.get("type") == "input_file" and not (
                _inline(part.get("file_data")) or part.get("file_id") or part.get("file_url")
            ):
                problems.append("an input_file needs file_data, file_id or file_url")
    return problems


def check_messages_parts(messages: list[dict[str, Any]]) -> list[str]:
    """Messages: image/document blocks only from the user, known media types, base64 that decodes."""
    problems: list[str] = []
    for message in messages:
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if block.get("type") not in ("image", "document"):
                continue
            if message["role"] != "user":
                problems.append(f"{block['type']} blocks are only allowed in user messages")
            source = block["source"]
            if source["type"] == "base64":
                allowed = ANTHROPIC_IMAGE_TYPES if block["type"] == "image" else {"application/pdf"}
                if source.get("media_type") not in allowed:
                    problems.append(
                        f"{block['type']}.source.media_type: {source.get('media_type')!r} is not allowed"
                    )
                if _b64(source.get("data", "")) is None:
                    problems.append(f"{block['type']}.source.data: invalid base64 data")
    return problems


class Hosted:
    """Hosted tool items the server issued, and the rules for sending them back."""

    def __init__(self) -> None:
        self.following: dict[str, dict[str, Any]] = {}
        """Reasoning item id -> the hosted item that followed it in the reply (Responses)."""
        self.items: list[dict[str, Any]] = []
        """Every hosted item or server block issued."""
        self.turns: dict[str, list[dict[str, Any]]] = {}
        """Tool-use id -> the server blocks issued in its reply (Messages)."""

    def search_call(self, query: str, item_id: str, reasoning: dict[str, Any] | None) -> dict[str, Any]:
        """A Responses ``web_search_call`` item, remembered as the one following ``reasoning``."""
        item = {
            "type": "web_search_call",
            "id": item_id,
            "status": "completed",
            "action": {"type": "search", "query": query},
        }
        self.items.append(item)
        if reasoning is not None:
            self.following[reasoning["id"]] = item
        return item

    def search_blocks(self, query: str, use_id: str) -> list[dict[str, Any]]:
        """Anthropic ``server_tool_use`` and ``web_search_tool_result`` blocks for a search."""
        result = {
            "type": "web_search_result",
            "url": "https://example.com/" + query.replace(" ", "-"),
            "title": f"About {query}",
            "encrypted_content": "enc-" + use_id,
            "page_age": "2 days ago",
        }
        blocks = [
            {"type": "server_tool_use", "id": use_id, "name": "web_search", "input": {"query": query}},
            {"type": "web_search_tool_result", "tool_use_id": use_id, "content": [result]},
        ]
        self.items.extend(blocks)
        return blocks

    def check_responses(self, items: list[dict[str, Any]]) -> list[str]:
        """Hosted items as issued; a reasoning item followed by its item."""
        problems: list[str] = []
        for n, item in enumerate(items):
            if (
                item.get("type", "").endswith("_call")
                and item["type"] != "function_call"
                and item not in self.items
            ):
                problems.append(f"{item['type']} {item.get('id')!r} is not an item the server issued")
            follower = self.following.get(item.get("id", "")) if item.get("type") == "reasoning" else None
            if follower is not None and (n + 1 >= len(items) or items[n + 1] != follower):
                problems.append(
                    f"Item {item['id']!r} of type 'reasoning' was sent without its required following item"
                )
        return problems

    def check_messages(self, messages: list[dict[str, Any]], current_turn: int) -> list[str]:
        """Server blocks as issued, each use with its result; a tool-use turn keeps its server blocks."""
        problems: list[str] = []
        for index, message in enumerate(messages):
            blocks = message["content"] if isinstance(message["content"], list) else []
            for at, block in enumerate(blocks):
                if block.get("type") == "server_tool_use":
                    after = blocks[at + 1] if at + 1 < len(blocks) else {}
                    if after.get("tool_use_id") != block["id"]:
                        problems.append(f"server_tool_use {block['id']!r} must be followed by its result")
                if (
                    block.get("type") in ("server_tool_use", "web_search_tool_result")
                    and block not in self.items
                ):
                    problems.append(f"{block['type']} block is not one the server issued")
            if index <= current_turn:
                continue
            for use in (b for b in blocks if b.get("type") == "tool_use"):
                issued = self.turns.get(use["id"])
                if issued and any(block not in blocks for block in issued):
                    problems.append(f"the tool-use turn of {use['id']} must keep its server tool blocks")
        return problems
