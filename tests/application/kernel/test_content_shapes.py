"""Content beyond text at the boundary: each provider's media parts, MCP tool schemas, hosted tool items."""

from __future__ import annotations

import contextledger
import pytest
from contextledger.adapters.providers.anthropic_messages import AnthropicFormat
from contextledger.adapters.providers.openai_responses import ResponsesFormat
from contextledger.application.kernel.messages import parse_messages
from contextledger.application.kernel.wire_shapes import HOSTED_ITEMS
from contextledger.domain.errors import InvalidMessageError

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"


@pytest.mark.parametrize(
    ("part", "expected"),
    [
        (
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}", "detail": "low"}},
            {"kind": "image", "source": "base64", "media_type": "image/png", "detail": "low"},
        ),
        (
            {"type": "image_url", "image_url": {"url": "https://x/cat.png"}},
            {"kind": "image", "source": "url"},
        ),
        ({"type": "file", "file": {"file_id": "file-1"}}, {"kind": "file", "source": "file_id"}),
        (
            {"type": "input_image", "file_id": "file-2", "detail": "auto"},
            {"kind": "image", "source": "file_id"},
        ),
        ({"type": "input_file", "file_url": "https://x/r.pdf"}, {"kind": "file", "source": "url"}),
        (
            {"type": "document", "source": {"type": "url", "url": "https://x/r.pdf"}, "title": "r.pdf"},
            {"kind": "file", "source": "url", "filename": "r.pdf"},
        ),
        (
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
            {"kind": "image", "source": "base64", "media_type": "image/png"},
        ),
        ({"type": "image", "base64": PNG, "mime_type": "image/png"}, {"kind": "image", "source": "base64"}),
        ({"type": "image", "url": "https://x/cat.png"}, {"kind": "image", "source": "url"}),
    ],
)
def test_each_providers_media_part_is_read_as_one_neutral_part(part, expected):
    """Chat, Responses, Anthropic and LangChain parts all become the ledger's media part, after the text."""
    (message,) = parse_messages({"role": "user", "content": [{"type": "text", "text": "see"}, part]})
    (media,) = message.media
    assert message.content == "see"
    assert media.offset == 3
    assert {k: getattr(media, k) for k in expected} == expected


def test_unknown_parts_and_parts_without_data_are_refused_typed():
    """An audio part or an image without its URL is a typed error, nothing written."""
    with pytest.raises(InvalidMessageError, match="input_audio"):
        parse_messages({"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]})
    with pytest.raises(InvalidMessageError, match="needs"):
        parse_messages({"role": "user", "content": [{"type": "image_url", "image_url": {}}]})


def test_an_image_is_stored_content_addressed_once_like_a_large_text(tmp_path):
    """The base64 data goes to the blob store under its SHA-256; the event keeps the address."""
    big = PNG + "A" * 20_000
    with contextledger.open_ledger(f"sqlite:///{tmp_path / 'l.db'}") as ledger:
        session = ledger.start_session()
        part = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{big}"}}
        for _ in range(2):
            ledger.append_many(session, [{"role": "user", "content": [part]}])
        events = [r.event for r in ledger.events(session)][1:]
        first, second = (e.media[0] for e in events)
        assert first.data == second.data
        assert type(first.data).__name__ == "BlobText"
        assert ledger.text(first.data) == big
        assert (first.width, first.height) == (1, 1)


def test_mcp_tools_are_accepted_as_tool_schemas():
    """An MCP Tool (inputSchema, title, annotations, outputSchema, _meta) is a tool schema (was refused)."""
    tool = {
        "name": "read",
        "title": "Read a file",
        "description": "Read.",
        "inputSchema": {"type": "object", "properties": {"p": {"type": "string"}}, "required": ["p"]},
        "outputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": True},
        "_meta": {"x": 1},
    }
    with contextledger.open_ledger("memory://") as ledger:
        agent = contextledger.AgentContext.start(ledger, provider="anthropic", tools=[tool])
        agent.add_user_message("hi")
        (sent,) = agent.request().arguments["tools"]
    sent.pop("cache_control")  # the request's breakpoint after the tools (no system prompt)
    assert sent == {"name": "read", "description": "Read.", "input_schema": tool["inputSchema"]}


def test_hosted_items_of_a_reply_are_kept_exactly_in_order():
    """A Responses web_search_call and Anthropic server tool blocks are kept in the reply's meta."""
    search = {
        "type": "web_search_call",
        "id": "ws_1",
        "status": "completed",
        "action": {"type": "search", "query": "q"},
    }
    reply = {"output": [search, {"type": "message", "content": [{"type": "output_text", "text": "ok"}]}]}
    parsed = ResponsesFormat().parse_reply(reply)
    assert parsed.message["meta"][HOSTED_ITEMS] == [search]
    blocks = [
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
        {"type": "text", "text": "found"},
    ]
    parsed = AnthropicFormat().parse_reply({"content": blocks})
    assert parsed.message["meta"][HOSTED_ITEMS] == blocks[:2]
    assert parsed.message["content"] == "found"
