"""The LangChain middleware on ChatOpenAI and ChatAnthropic (thinking) through the strict server."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import contextledger
import pytest

pytest.importorskip("langchain_anthropic")
pytest.importorskip("langchain_openai")

from contextledger.adapters.frameworks.langchain import ContextLedgerMiddleware
from contextledger.application.audit.call_recorder import payload_sha
from langchain.agents import create_agent
from langchain_anthropic import ChatAnthropic
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

sys.path.insert(0, str(Path(__file__).parents[1] / "providers"))
from strict_server import Turn, strict_server

BUDGET = 3_000
BIG = "".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(400))
SCRIPT = [
    Turn(thinking="Read the big file first.", calls=(("read_file", {"path": "big.txt"}),)),
    Turn(thinking="Then a command.", calls=(("run", {"command": "ls"}), ("run", {"command": "pwd"}))),
    Turn(text="Done with the first task."),
    Turn(thinking="A second task.", calls=(("run", {"command": "date"}),)),
    Turn(text="All done."),
]
KEYS = {"openai": ("messages", "tools"), "anthropic": ("system", "messages", "tools")}


@tool
def read_file(path: str) -> str:
    """Read a file (big.txt is large)."""
    return BIG if path == "big.txt" else "small"


@tool
def run(command: str) -> str:
    """Run a shell command."""
    return f"ran {command}: exit code 0"


def _model(provider: str, url: str) -> Any:
    if provider == "anthropic":
        return ChatAnthropic(
            model="claude-strict",
            base_url=url,
            api_key="x",
            max_tokens=2048,
            thinking={"type": "enabled", "budget_tokens": 1024},
            max_retries=0,
        )
    return ChatOpenAI(model="gpt-strict", base_url=f"{url}/v1", api_key="x", max_retries=0)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_langchain_agent_speaks_the_models_wire_within_budget_and_every_call_replays(provider, tmp_path):
    """create_agent on ChatOpenAI / ChatAnthropic (thinking): accepted, in budget, replayed as sent.

    The strict server accepts every request (signed thinking sent back) within budget by its own
    count; each call is audited in the model's wire and replays byte for byte as it was sent.
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
        first = agent.invoke({"messages": [{"role": "user", "content": "How long is big.txt?"}]})
        agent.invoke({"messages": [*first["messages"], {"role": "user", "content": "and the date?"}]})
        session = middleware.session_id
        assert [e.problems for e in server.exchanges] == [[]] * len(SCRIPT)
        assert max(e.tokens for e in server.exchanges) <= BUDGET
        views = contextledger.CallRecorder(ledger).calls(session)
        assert len(views) == len(server.exchanges)
        for view, exchange in zip(views, server.exchanges, strict=True):
            assert view.record.wire_format == provider
            sent = {k: exchange.body[k] for k in KEYS[provider] if k in exchange.body}
            replayed = contextledger.replay_call(ledger, view.record.call_id, session)
            assert replayed.payload == sent
            assert replayed.payload_sha == view.record.payload_sha == payload_sha(sent)
            assert view.usage is not None
            assert view.usage.input_tokens == exchange.tokens
    if provider == "anthropic":
        assert server.thinking
