"""What an image or file part costs: its size read from its bytes and each provider's documented estimate.

Pure functions: the token estimate of a ``MediaPart`` is the larger of the OpenAI and the Anthropic
estimate, so a rendered context is within budget on either wire (like ``projections.wire``).

- OpenAI (vision guide, "calculating costs"): ``detail: "low"`` is 85 tokens; otherwise the image is
  scaled to fit 2048 x 2048, then its shortest side to 768, and costs 85 + 170 per 512-pixel tile.
- Anthropic (vision guide, "calculate image costs"): an image larger than 1568 pixels on its long
  side is scaled down to it (aspect kept), then costs ``width * height / 750`` tokens.
- Unknown dimensions (a URL or a file id, bytes we cannot read): ``UNKNOWN_IMAGE_TOKENS``, the
  largest either estimate gives.
- PDFs (Anthropic's PDF support guide: "1,500 to 3,000 tokens per page" of text, plus each page as
  an image): ``PDF_PAGE_TOKENS`` per page; the pages are counted in the bytes, ``UNKNOWN_FILE_PAGES``
  when they cannot be.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import struct

import msgspec
from contextledger.domain.content import MediaPart
from contextledger.domain.ports import TokenCounter
from contextledger.projections.state import Entry

__all__ = [
    "MEDIA_OVERHEAD",
    "NOTE_MARGIN",
    "PDF_PAGE_TOKENS",
    "UNKNOWN_FILE_PAGES",
    "UNKNOWN_IMAGE_TOKENS",
    "anthropic_image_tokens",
    "evict_media",
    "image_size",
    "media_note",
    "media_stub",
    "media_tokens",
    "openai_image_tokens",
    "pdf_pages",
]

MEDIA_OVERHEAD = 40
"""Tokens counted per part for its JSON structure on the wire (type, media type, detail, file name;
the data itself is never counted as text: providers bill images and pages by the estimate)."""

UNKNOWN_IMAGE_TOKENS = 1_600
"""An image whose size is unknown: Anthropic's largest image (about 1.15 megapixels, 1,600 tokens)
is above OpenAI's largest high-detail image (8 tiles: 1,445 tokens)."""

PDF_PAGE_TOKENS = 4_600
"""One PDF page: 3,000 tokens of text (the high end of Anthropic's range) plus the page as an image
(``UNKNOWN_IMAGE_TOKENS``)."""

UNKNOWN_FILE_PAGES = 10
"""Pages assumed for a file whose pages cannot be counted (a URL, a file id, not a PDF)."""

_ANTHROPIC_LONG_SIDE = 1_568
_OPENAI_LONG_SIDE = 2_048
_OPENAI_SHORT_SIDE = 768
_OPENAI_TILE = 512
_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
"""JPEG start-of-frame markers: the segment that holds the height and width."""
_STANDALONE_MARKERS = frozenset({0x01, 0xD8, *range(0xD0, 0xD8)})
"""JPEG markers without a length (they are skipped)."""
_SNIFF_CHARS = 96 * 1024
"""Leading base64 characters decoded to read an image's size (a JPEG's frame header may come late)."""


def openai_image_tokens(width: int | None, height: int | None, detail: str | None) -> int:
    """Return OpenAI's documented token cost of an image (85 for low detail; else tiles)."""
    if detail == "low":
        return 85
    if not width or not height:
        return UNKNOWN_IMAGE_TOKENS
    w, h = float(width), float(height)
    if max(w, h) > _OPENAI_LONG_SIDE:
        scale = _OPENAI_LONG_SIDE / max(w, h)
        w, h = w * scale, h * scale
    if min(w, h) > _OPENAI_SHORT_SIDE:
        scale = _OPENAI_SHORT_SIDE / min(w, h)
        w, h = w * scale, h * scale
    tiles = math.ceil(w / _OPENAI_TILE) * math.ceil(h / _OPENAI_TILE)
    return 85 + 170 * tiles


def anthropic_image_tokens(width: int | None, height: int | None) -> int:
    """Return Anthropic's documented token cost of an image: ``width * height / 750`` after scaling."""
    if not width or not height:
        return UNKNOWN_IMAGE_TOKENS
    w, h = float(width), float(height)
    if max(w, h) > _ANTHROPIC_LONG_SIDE:
        scale = _ANTHROPIC_LONG_SIDE / max(w, h)
        w, h = w * scale, h * scale
    return min(math.ceil(w * h / 750), UNKNOWN_IMAGE_TOKENS)


def media_tokens(part: MediaPart) -> int:
    """Return the tokens a part is counted for on any wire: the larger estimate, plus its structure."""
    if part.kind == "image":
        estimate = max(
            openai_image_tokens(part.width, part.height, part.detail),
            anthropic_image_tokens(part.width, part.height),
        )
    else:
        estimate = PDF_PAGE_TOKENS * (part.pages or UNKNOWN_FILE_PAGES)
    return estimate + MEDIA_OVERHEAD


def media_stub(part: MediaPart, position: int) -> str:
    """Return the text that stands for an evicted part: what it was, its address, how to recall it."""
    name = f" {part.filename}" if part.filename else ""
    return f"[{part.kind} omitted:{name} sha256 {part.sha256[:12]}, recall: restore seq {position}]"


NOTE_MARGIN = 2
"""Tokens added to a counted stub note for the newline that joins it to the text (a join may merge
or split a token at the seam)."""


def media_note(parts: tuple[MediaPart, ...], position: int) -> str:
    """Return the stubs of evicted parts, one a line."""
    return "\n".join(media_stub(part, position) for part in parts)


def evict_media(entry: Entry, counter: TokenCounter, rule: str) -> Entry:
    """Return ``entry`` with its media parts replaced by their stubs (counted through ``counter``)."""
    if not entry.media:
        return entry
    note = media_note(entry.media, entry.position)
    if entry.media_note:
        note = f"{entry.media_note}\n{note}"
        freed = counter.count(entry.media_note) + NOTE_MARGIN
    else:
        freed = 0
    freed += sum(media_tokens(part) for part in entry.media)
    tokens = entry.tokens - freed + counter.count(note) + NOTE_MARGIN
    return msgspec.structs.replace(entry, media=(), media_note=note, tokens=tokens, kind="stub", rule=rule)


def _decoded(data: str, limit: int | None) -> bytes | None:
    text = data if limit is None else data[: limit - limit % 4]
    try:
        return base64.b64decode(text, validate=False)
    except (binascii.Error, ValueError):
        return None


def image_size(data: str) -> tuple[int, int] | None:
    """Return (width, height) of a base64 PNG, GIF, WebP or JPEG from its header; None if unreadable."""
    raw = _decoded(data, _SNIFF_CHARS)
    if raw is None:
        return None
    try:
        return _size(raw)
    except (struct.error, IndexError):
        return None


def _size(raw: bytes) -> tuple[int, int] | None:
    if raw.startswith(b"\x89PNG\r\n\x1a\n"):
        width, height = struct.unpack(">II", raw[16:24])
        return width, height
    if raw[:6] in (b"GIF87a", b"GIF89a"):
        width, height = struct.unpack("<HH", raw[6:10])
        return width, height
    if raw.startswith(b"RIFF") and raw[8:12] == b"WEBP":
        return _webp_size(raw)
    if raw.startswith(b"\xff\xd8"):
        return _jpeg_size(raw)
    return None


def _webp_size(raw: bytes) -> tuple[int, int] | None:
    chunk = raw[12:16]
    if chunk == b"VP8X":
        return 1 + int.from_bytes(raw[24:27], "little"), 1 + int.from_bytes(raw[27:30], "little")
    if chunk == b"VP8 ":
        width, height = struct.unpack("<HH", raw[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L":
        bits = int.from_bytes(raw[21:25], "little")
        return 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
    return None


def _jpeg_size(raw: bytes) -> tuple[int, int] | None:
    at = 2
    while at + 9 < len(raw):
        if raw[at : at + 1] != b"\xff":
            return None
        marker = raw[at + 1]
        if marker in _STANDALONE_MARKERS:
            at += 2
            continue
        if marker in _SOF_MARKERS:
            height, width = struct.unpack(">HH", raw[at + 5 : at + 9])
            return width, height
        at += 2 + struct.unpack(">H", raw[at + 2 : at + 4])[0]
    return None


_PAGE = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")


def pdf_pages(data: str) -> int | None:
    """Return the pages of a base64 PDF (its ``/Type /Page`` objects); None if it is not a readable PDF."""
    raw = _decoded(data, None)
    if raw is None or not raw.startswith(b"%PDF"):
        return None
    return len(_PAGE.findall(raw)) or None
