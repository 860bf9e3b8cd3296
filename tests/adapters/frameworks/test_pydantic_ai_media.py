"""The pydantic-ai processor with an image and a PDF in the prompt, on Responses and Anthropic."""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from pathlib import Path
from typing import Any

import anthropic
import contextledger
import openai
import pytest

pytest.importorskip("pydantic_ai")

from contextledger.adapters.frameworks.pydantic_ai import ContextLedgerHistory
from contextledger.domain.events import UserMessageAdded
from pydantic_ai.messages import BinaryContent

sys.path.insert(0, str(Path(__file__).parents[1] / "providers"))
sys.path.insert(0, str(Path(__file__).parent))
from strict_server import Turn, strict_server
from test_pydantic_ai_wires import _agent
from test_strict_content import IMAGE, REPORT

BUDGET = 16_000
SCRIPT = [
    Turn(thinking="Read the file first.", calls=(("read_file", {"path": "big.txt"}),)),
    Turn(text="A fox and a report."),
]


async def _run(provider: str, url: str, history: ContextLedgerHistory) -> Any:
    sdk = (
        anthropic.AsyncAnthropic(base_url=url, api_key="x", max_retries=0)
        if provider == "anthropic"
        else openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
    )
    prompt = [
        "What is in the picture and the report?",
        BinaryContent(data=base64.b64decode(IMAGE), media_type="image/png"),
        BinaryContent(data=base64.b64decode(REPORT), media_type="application/pdf"),
    ]
    async with sdk as client:
        return await _agent(provider, client, history).run(prompt)


@pytest.mark.parametrize("provider", ["openai-responses", "anthropic"])
def test_pydantic_ai_keeps_images_and_files_and_sends_them_within_budget(provider, tmp_path):
    """The prompt's image and PDF are stored (no longer dropped) and sent as the provider's parts.

    The strict server accepts them within budget by its own count; later requests carry their stubs
    once the per-message cap evicts them; every call replays.
    """
    with (
        strict_server(SCRIPT, budget=BUDGET) as server,
        contextledger.open_ledger(f"sqlite:///{tmp_path / 'l.db'}") as ledger,
    ):
        history = ContextLedgerHistory.start(ledger, system_prompt="You read files.", budget=BUDGET)
        result = asyncio.run(_run(provider, server.url, history))
        history.record(result.new_messages())
        assert result.output == "A fox and a report."
        assert [e.problems for e in server.exchanges] == [[]] * len(SCRIPT)
        assert max(e.tokens for e in server.exchanges) <= BUDGET
        (user,) = [
            r.event for r in ledger.events(history.session_id) if isinstance(r.event, UserMessageAdded)
        ]
        assert [(m.kind, m.media_type) for m in user.media] == [
            ("image", "image/png"),
            ("file", "application/pdf"),
        ]
        for exchange in server.exchanges:  # the parts, or their stubs once the per-message cap evicts them
            messages = exchange.body.get("messages") or exchange.body.get("input")
            parts = [p for m in messages if isinstance(m.get("content"), list) for p in m["content"]]
            kinds = {p.get("type") for p in parts}
            shown = bool(kinds & {"image", "input_image"}) and bool(kinds & {"document", "input_file"})
            assert shown or "[image omitted: sha256 " in json.dumps(messages), exchange.body
        first = json.dumps(server.exchanges[0].body)
        assert IMAGE in first
        assert REPORT in first
        for view in contextledger.CallRecorder(ledger).calls(history.session_id):
            replayed = contextledger.replay_call(ledger, view.record.call_id, history.session_id)
            assert replayed.payload_sha == view.record.payload_sha
