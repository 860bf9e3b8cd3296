"""The LangChain middleware with an image and a PDF in the user's message, on ChatOpenAI and ChatAnthropic."""

from __future__ import annotations

import sys
from pathlib import Path

import contextledger
import pytest

pytest.importorskip("langchain_anthropic")
pytest.importorskip("langchain_openai")

from contextledger.adapters.frameworks.langchain import ContextLedgerMiddleware
from langchain.agents import create_agent

sys.path.insert(0, str(Path(__file__).parents[1] / "providers"))
sys.path.insert(0, str(Path(__file__).parent))
from strict_server import Turn, strict_server
from test_langchain_wires import KEYS, _model, read_file, run
from test_strict_content import IMAGE, REPORT

BUDGET = 16_000
SCRIPT = [
    Turn(thinking="Read the file.", calls=(("read_file", {"path": "big.txt"}),)),
    Turn(text="A fox, and a two-page report."),
]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_langchain_agent_sends_images_and_files_within_budget_and_every_call_replays(provider, tmp_path):
    """LangChain image and file blocks are stored, sent as the model's parts, in budget and replayed.

    The strict server accepts each request within budget by its own count; each call replays as sent.
    """
    with (
        strict_server(SCRIPT, budget=BUDGET) as server,
        contextledger.open_ledger(f"sqlite:///{tmp_path / 'l.db'}") as ledger,
    ):
        middleware = ContextLedgerMiddleware.start(
            ledger, system_prompt="You read files.", tools=[read_file, run], budget=BUDGET
        )
        agent = create_agent(
            _model(provider, server.url),
            tools=[read_file, run],
            system_prompt="You read files.",
            middleware=[middleware],
        )
        content = [
            {"type": "text", "text": "What is in the picture and the report?"},
            {"type": "image", "base64": IMAGE, "mime_type": "image/png"},
            {"type": "file", "base64": REPORT, "mime_type": "application/pdf", "filename": "report.pdf"},
        ]
        agent.invoke({"messages": [{"role": "user", "content": content}]})
        session = middleware.session_id
        assert [e.problems for e in server.exchanges] == [[]] * len(SCRIPT)
        assert max(e.tokens for e in server.exchanges) <= BUDGET
        sent = server.exchanges[0].body["messages"]
        kinds = {p.get("type") for m in sent if isinstance(m["content"], list) for p in m["content"]}
        assert kinds >= ({"image", "document"} if provider == "anthropic" else {"image_url", "file"})
        (user,) = [r.event for r in ledger.events(session) if type(r.event).__name__ == "UserMessageAdded"]
        assert [m.kind for m in user.media] == ["image", "file"]
        for view, exchange in zip(
            contextledger.CallRecorder(ledger).calls(session), server.exchanges, strict=True
        ):
            replayed = contextledger.replay_call(ledger, view.record.call_id, session)
            assert replayed.payload == {k: exchange.body[k] for k in KEYS[provider] if k in exchange.body}
