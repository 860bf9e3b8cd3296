"""Image and file parts: sizes read from bytes, the providers' documented estimates, stubs and eviction."""

from __future__ import annotations

import base64
import struct

import contextledger
import msgspec
import pytest
from contextledger.domain.content import InlineText, MediaPart
from contextledger.projections.context import MediaMessage, RenderedMessage
from contextledger.projections.media import (
    MEDIA_OVERHEAD,
    PDF_PAGE_TOKENS,
    UNKNOWN_IMAGE_TOKENS,
    anthropic_image_tokens,
    image_size,
    media_stub,
    media_tokens,
    openai_image_tokens,
    pdf_pages,
)


def _png(width: int, height: int) -> str:
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return base64.b64encode(
        b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr + b"\0" * 8
    ).decode()


@pytest.mark.parametrize(
    ("width", "height", "detail", "tokens"),
    [
        (1024, 1024, "high", 765),  # OpenAI's worked example: 768 x 768, 4 tiles
        (2048, 4096, "high", 1105),  # 1024 x 2048, then 768 x 1536: 6 tiles
        (4096, 8192, "low", 85),
        (200, 100, None, 255),  # one tile; no detail counts as high
    ],
)
def test_openai_estimate_follows_the_documented_tiles(width, height, detail, tokens):
    """The tile formula gives the numbers of OpenAI's own worked examples."""
    assert openai_image_tokens(width, height, detail) == tokens


def test_anthropic_estimate_is_pixels_over_750_after_scaling_and_unknown_sizes_are_the_largest():
    """w*h/750 (1000 x 1000: 1334, the documented example); the long side is scaled to 1568."""
    assert anthropic_image_tokens(1000, 1000) == 1334
    assert anthropic_image_tokens(1568, 1568) <= UNKNOWN_IMAGE_TOKENS
    assert (
        anthropic_image_tokens(None, None) == UNKNOWN_IMAGE_TOKENS >= openai_image_tokens(9000, 9000, "high")
    )


def test_sizes_and_pages_are_read_from_the_bytes():
    """PNG, GIF, JPEG headers give the size; a PDF's page objects its pages; garbage gives None."""
    assert image_size(_png(640, 480)) == (640, 480)
    gif = base64.b64encode(b"GIF89a" + struct.pack("<HH", 31, 17) + b"\0" * 30).decode()
    assert image_size(gif) == (31, 17)
    jpeg = (
        b"\xff\xd8"
        b"\xff\xe0" + struct.pack(">H", 4) + b"\0\0" + b"\xff\xc0" + struct.pack(">HBHH", 17, 8, 99, 77)
    )
    assert image_size(base64.b64encode(jpeg + b"\0" * 20).decode()) == (77, 99)
    assert image_size("not base64 at all!") is None
    pdf = b"%PDF-1.4 /Type /Pages /Type /Page /Type /Page /Type /Page %%EOF"
    assert pdf_pages(base64.b64encode(pdf).decode()) == 3
    assert pdf_pages(_png(1, 1)) is None


def test_a_part_costs_the_larger_estimate_and_its_stub_names_its_address_and_recall():
    """On any wire a part counts the larger provider estimate plus its structure; PDFs per page."""
    image = MediaPart(
        kind="image", source="base64", data=InlineText("x"), sha256="ab" * 32, width=1000, height=1000
    )
    assert media_tokens(image) == max(1334, openai_image_tokens(1000, 1000, None)) + MEDIA_OVERHEAD
    pdf = MediaPart(
        kind="file", source="url", data=InlineText("u"), sha256="cd" * 32, pages=2, filename="r.pdf"
    )
    assert media_tokens(pdf) == 2 * PDF_PAGE_TOKENS + MEDIA_OVERHEAD
    assert media_stub(image, 7) == f"[image omitted: sha256 {'ab' * 6}, recall: restore seq 7]"
    assert media_stub(pdf, 3).startswith("[file omitted: r.pdf sha256 cdcdcd")


def test_a_message_without_parts_encodes_as_before_so_old_context_hashes_hold():
    """Only a message with parts is a MediaMessage; a plain one encodes without a media key."""
    plain = RenderedMessage(role="user", text="hi", tokens=10)
    assert b"media" not in msgspec.json.encode(plain)
    with_media = MediaMessage(role="user", text="hi", tokens=10, media=())
    assert b"media" in msgspec.json.encode(with_media)


def test_retention_media_keep_last_stubs_older_parts_and_keeps_their_text(tmp_path):
    """With retention.media.keep_last=1, older images become stubs at a compaction point; text stays."""
    policy = contextledger.Policy.parse(
        {"budget": {"total": 14_000, "output_reserve": 1_000}, "retention": {"media": {"keep_last": 1}}}
    )
    with contextledger.open_ledger(f"sqlite:///{tmp_path / 'l.db'}") as ledger:
        agent = contextledger.AgentContext.start(ledger, provider="openai", policy=policy, system_prompt="s")
        for n in range(12):
            image = {
                "type": "image_url",
                "image_url": {"url": f"data:image/png;base64,{_png(1000 + n, 1000)}"},
            }
            agent.add_user_message(
                {"role": "user", "content": [{"type": "text", "text": f"picture {n}"}, image]}
            )
            request = agent.request()
            assert request.tokens <= request.context.budget
        users = [m for m in request.arguments["messages"] if m["role"] == "user"]
        shown = [m for m in users if isinstance(m["content"], list)]
        stubbed = [
            m for m in users if isinstance(m["content"], str) and "[image omitted: sha256 " in m["content"]
        ]
        assert shown[-1]["content"][0] == {"type": "text", "text": "picture 11"}
        assert stubbed
        assert all(m["content"].startswith("picture ") for m in stubbed)
        view = contextledger.CallRecorder(ledger).calls(agent.session_id)[-1]
        assert (
            contextledger.replay_call(ledger, view.record.call_id, agent.session_id).payload
            == request.arguments
        )
