"""Content beyond text through the strict server: images, files and hosted tool items on each wire."""

from __future__ import annotations

import base64
import struct
import sys
from pathlib import Path
from typing import Any

import anthropic
import contextledger
import openai
import pytest
from contextledger.application.audit.call_recorder import payload_sha

sys.path.insert(0, str(Path(__file__).parent))
from strict_server import StrictServer, Turn, strict_server
from test_strict_wires import KEYS, OUTPUTS, TOOLS, client_for, send

BUDGET = 24_000


def png(width: int, height: int) -> str:
    """A base64 PNG of the given size (its signature and IHDR chunk, as real files start)."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    raw = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + header + b"\x00" * 4 + b"\x00" * 600
    return base64.b64encode(raw).decode()


def pdf(pages: int) -> str:
    """A base64 PDF with ``pages`` page objects."""
    body = b"%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n2 0 obj << /Type /Pages >> endobj\n"
    body += b"".join(b"%d 0 obj << /Type /Page /Parent 2 0 R >> endobj\n" % (3 + n) for n in range(pages))
    return base64.b64encode(body + b"%%EOF\n").decode()


IMAGE = png(1024, 768)
SMALL = png(200, 100)
REPORT = pdf(2)


def user_message(provider: str, text: str, image: str, *, report: bool) -> dict[str, Any]:
    """A user message with text, an image and (``report``) a PDF, in ``provider``'s own shape."""
    if provider == "openai":
        parts: list[dict[str, Any]] = [
            {"type": "text", "text": text},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{image}", "detail": "high"}},
        ]
        if report:
            file = {"file_data": f"data:application/pdf;base64,{REPORT}", "filename": "report.pdf"}
            parts.append({"type": "file", "file": file})
        return {"role": "user", "content": parts}
    if provider == "openai-responses":
        parts = [
            {"type": "input_text", "text": text},
            {"type": "input_image", "image_url": f"data:image/png;base64,{image}", "detail": "high"},
        ]
        if report:
            parts.append(
                {
                    "type": "input_file",
                    "file_data": f"data:application/pdf;base64,{REPORT}",
                    "filename": "report.pdf",
                }
            )
        return {"role": "user", "content": parts}
    parts = [
        {"type": "text", "text": text},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": image}},
    ]
    if report:
        source = {"type": "base64", "media_type": "application/pdf", "data": REPORT}
        parts.append({"type": "document", "source": source, "title": "report.pdf"})
    return {"role": "user", "content": parts}


SCRIPT = [
    Turn(
        thinking="Search first, then read.", search="fox facts", calls=(("read_file", {"path": "big.txt"}),)
    ),
    Turn(thinking="Now a command.", calls=(("run", {"command": "ls"}),)),
    Turn(text="The picture shows a fox."),
    Turn(search="fox habitat", text="Foxes live almost everywhere."),
]


def drive(agent: Any, client: Any, provider: str) -> None:
    """Two tasks with media (a PDF in the first), each a tool loop until the model answers."""
    for text, image, report in (
        ("what is in the picture and the report?", IMAGE, True),
        ("and here?", SMALL, False),
    ):
        agent.add_user_message(user_message(provider, text, image, report=report))
        for _ in range(6):
            request = agent.request()
            calls = agent.record_response(request.call_id, send(client, provider, request.arguments))
            if not calls:
                break
            for tool in calls:
                agent.record_tool_result(tool.id, OUTPUTS[tool.name])


def check_replays(ledger: contextledger.Ledger, server: StrictServer, session: str, provider: str) -> None:
    """Every request accepted within budget by the server's count; every call replays byte for byte."""
    assert [e.problems for e in server.exchanges] == [[]] * len(server.exchanges)
    assert max(e.tokens for e in server.exchanges) <= BUDGET
    views = contextledger.CallRecorder(ledger).calls(session)
    assert len(views) == len(server.exchanges)
    for view, exchange in zip(views, server.exchanges, strict=True):
        sent = {k: exchange.body[k] for k in KEYS[provider] if k in exchange.body}
        replayed = contextledger.replay_call(ledger, view.record.call_id, session)
        assert replayed.payload == sent
        assert replayed.payload_sha == view.record.payload_sha == payload_sha(sent)
        assert view.usage is not None
        assert view.usage.input_tokens == exchange.tokens


def _sent_parts(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The parts of every message sent, without Anthropic's cache breakpoints (the wire's own)."""
    messages = body.get("messages") or body.get("input") or []
    parts = [p for m in messages if isinstance(m.get("content"), list) for p in m["content"]]
    return [{k: v for k, v in p.items() if k != "cache_control"} for p in parts]


@pytest.mark.parametrize("provider", ["openai", "openai-responses", "anthropic"])
def test_images_files_and_hosted_items_are_accepted_within_budget_and_replay(provider, tmp_path):
    """Images and a PDF go in as each wire's own parts, come back exactly, and count within budget.

    Hosted tool items of a reply (Responses, Messages) are stored and sent back as the server
    requires; every call replays byte for byte.
    """
    with (
        strict_server(SCRIPT, budget=BUDGET) as server,
        contextledger.open_ledger(f"sqlite:///{tmp_path / 'l.db'}") as ledger,
        client_for(provider, server.url) as client,
    ):
        agent = contextledger.AgentContext.start(
            ledger, provider=provider, budget=BUDGET, system_prompt="be brief", tools=TOOLS
        )
        drive(agent, client, provider)
        check_replays(ledger, server, agent.session_id, provider)
        first = server.exchanges[0].body
        sent_first = user_message(provider, "", IMAGE, report=True)["content"][1:]
        parts = _sent_parts(first)
        assert all(part in parts for part in sent_first)  # each part exactly as the caller gave it
        if provider == "anthropic":
            assert {p["type"] for p in parts} >= {"image", "document"}
    if provider != "openai":
        assert server.hosted.items  # searched in the first reply
        follow_up = _sent_parts(server.exchanges[1].body) + server.exchanges[1].body.get("input", [])
        assert any(item in follow_up for item in server.hosted.items)  # sent back (else refused)


def test_the_strict_server_refuses_bad_media_and_missing_hosted_items():
    """The strict server refuses what the real APIs refuse for media and hosted items.

    A media type Anthropic does not take, a reasoning item sent without the web_search_call that
    followed it, a tool-use turn without its server tool blocks, an image in an assistant message.
    """
    turns = [Turn(thinking="look it up", search="q", calls=(("run", {}),)), Turn(text="ok")]
    with strict_server(turns, budget=BUDGET) as server:
        bad = {"type": "image", "source": {"type": "base64", "media_type": "image/bmp", "data": IMAGE}}
        with anthropic.Anthropic(base_url=server.url, api_key="x") as client:
            with pytest.raises(anthropic.BadRequestError, match="media_type"):
                client.messages.create(
                    model="m", max_tokens=10, messages=[{"role": "user", "content": [bad]}]
                )
            first = client.messages.create(
                model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
            )
            blocks = [b.model_dump(exclude_none=True) for b in first.content]
            use = next(b for b in blocks if b["type"] == "tool_use")
            without = [b for b in blocks if b["type"] not in ("server_tool_use", "web_search_tool_result")]
            result = {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": "x"}],
            }
            with pytest.raises(anthropic.BadRequestError, match="server tool blocks"):
                client.messages.create(
                    model="m",
                    max_tokens=10,
                    messages=[
                        {"role": "user", "content": "hi"},
                        {"role": "assistant", "content": without},
                        result,
                    ],
                )
    with (
        strict_server(turns, budget=BUDGET) as server,
        openai.OpenAI(base_url=f"{server.url}/v1", api_key="x") as client,
    ):
        reply = client.responses.create(model="m", input=[{"role": "user", "content": "hi"}], store=False)
        output = [i.model_dump(exclude_none=True) for i in reply.output]
        call = next(i for i in output if i["type"] == "function_call")
        kept = [i for i in output if i["type"] != "web_search_call"]
        answer = {"type": "function_call_output", "call_id": call["call_id"], "output": "x"}
        with pytest.raises(openai.BadRequestError, match="required following item"):
            client.responses.create(
                model="m", input=[{"role": "user", "content": "hi"}, *kept, answer], store=False
            )
        image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + IMAGE}}
        with pytest.raises(openai.BadRequestError, match="only allowed in user messages"):
            client.chat.completions.create(model="m", messages=[{"role": "assistant", "content": [image]}])
