"""Images and files in imported user messages are kept as the ledger's media parts, not dropped."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from pathlib import Path

import contextledger
from contextledger import UserMessageAdded
from contextledger.adapters.importers.service import import_file


def _png(width: int, height: int) -> str:
    """A real PNG of ``width`` x ``height`` pixels, base64 (its size is read for the token estimate)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    rows = zlib.compress(b"".join(b"\x00" + b"\x00" * width for _ in range(height)))
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", rows) + chunk(b"IEND", b"")
    return base64.b64encode(png).decode()


PNG = _png(3, 2)


def _users(ledger: contextledger.Ledger, session_id: str) -> list[UserMessageAdded]:
    return [r.event for r in ledger.events(session_id) if isinstance(r.event, UserMessageAdded)]


def _write(path: Path, content: object) -> Path:
    path.write_text(json.dumps(content), encoding="utf-8")
    return path


def test_an_openai_user_image_is_kept_in_place_beside_its_text(tmp_path, ledger):
    """A screenshot sent with "What is wrong here?" was dropped with a note: the model's input was lost.

    Now it is a media part after the text before it; an audio part (the ledger keeps no audio) is still
    reported dropped.
    """
    content = [
        {"type": "text", "text": "What is wrong here?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}", "detail": "high"}},
        {"type": "text", "text": "It fails on save."},
        {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
    ]
    chat = [{"role": "user", "content": content}, {"role": "assistant", "content": "The save path is wrong."}]
    done = import_file(ledger, _write(tmp_path / "chat.json", chat), "openai")
    assert done.error is None, done.error
    (user,) = _users(ledger, done.sessions[0].session_id)
    assert ledger.text(user.content) == "What is wrong here?\nIt fails on save."
    (image,) = user.media
    assert (image.kind, image.source, image.media_type, image.detail) == (
        "image",
        "base64",
        "image/png",
        "high",
    )
    assert (image.width, image.height) == (3, 2)
    assert image.offset == len("What is wrong here?")
    assert ledger.text(image.data) == PNG
    notes = done.sessions[0].notes
    assert any("input_audio" in n for n in notes)
    assert not any("image_url" in n for n in notes)


def _anthropic() -> dict:
    document = {"type": "document", "source": {"type": "url", "url": "https://example.com/spec.pdf"}}
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
    messages = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Read this spec."}, document | {"title": "spec.pdf"}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Send the mockup."}]},
        {"role": "user", "content": [image]},
        {"role": "assistant", "content": [{"type": "text", "text": "Thanks."}]},
    ]
    return {"model": "claude-x", "messages": messages}


IMPORTED_BEFORE_MEDIA = "anthropic-ddcff5afa293339a"
"""The session id the importer gave ``_anthropic()`` before it kept media (at ``57402ad``)."""


def test_anthropic_images_and_documents_are_kept_and_the_session_id_is_unchanged(tmp_path, ledger):
    """An image-only user turn was dropped whole and a document block noted away; both are kept now.

    The session's id is the one an import before media gave it (the digest leaves media out), so a
    transcript imported before is still ``unchanged`` on a second import, never a second session.
    """
    done = import_file(ledger, _write(tmp_path / "a.json", _anthropic()), "anthropic")
    assert done.error is None, done.error
    spec, mockup = _users(ledger, done.sessions[0].session_id)
    (document,) = spec.media
    assert (document.kind, document.source, document.filename) == ("file", "url", "spec.pdf")
    assert ledger.text(document.data) == "https://example.com/spec.pdf"
    assert ledger.text(mockup.content) == ""
    assert [(m.kind, m.media_type, m.width) for m in mockup.media] == [("image", "image/png", 3)]
    assert not any("image" in n or "document" in n for n in done.sessions[0].notes)

    assert done.sessions[0].session_id == IMPORTED_BEFORE_MEDIA
    again = import_file(ledger, tmp_path / "a.json", "anthropic")
    assert again.sessions[0].status == "unchanged"


def test_a_claude_code_pasted_screenshot_is_kept(tmp_path, ledger):
    """A Claude Code user turn holding a pasted image and its question keeps both."""
    base = {"sessionId": "s1", "cwd": "/w", "timestamp": "2026-01-01T00:00:00Z", "parentUuid": None}
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
    content = [image, {"type": "text", "text": "Why is the button grey?"}]
    user = base | {"type": "user", "uuid": "a1", "message": {"role": "user", "content": content}}
    reply = {
        "role": "assistant",
        "id": "m1",
        "content": [{"type": "text", "text": "Disabled."}],
        "model": "c",
    }
    assistant = base | {"type": "assistant", "uuid": "a2", "parentUuid": "a1", "message": reply}
    path = tmp_path / "cc.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in (user, assistant)) + "\n")
    done = import_file(ledger, path)
    assert (done.error, done.format) == (None, "claude-code")
    (asked,) = _users(ledger, done.sessions[0].session_id)
    assert ledger.text(asked.content) == "Why is the button grey?"
    assert [(m.kind, m.offset, m.height) for m in asked.media] == [("image", 0, 2)]


def test_openhands_image_urls_are_kept_and_a_malformed_part_is_noted(tmp_path, ledger):
    """OpenHands user messages carry ``image_urls``: each is a media part after the text; "" is noted."""
    urls = [f"data:image/png;base64,{PNG}", "https://example.com/b.png", ""]
    events = [
        {
            "id": 0,
            "source": "user",
            "action": "message",
            "args": {"content": "Match this", "image_urls": urls},
        },
        {"id": 1, "source": "agent", "action": "message", "args": {"content": "Done."}},
    ]
    done = import_file(ledger, _write(tmp_path / "oh.json", events), "openhands")
    assert done.error is None, done.error
    (user,) = _users(ledger, done.sessions[0].session_id)
    assert [(m.source, m.offset) for m in user.media] == [("base64", 10), ("url", 10)]
    assert any("malformed" in n for n in done.sessions[0].notes)
