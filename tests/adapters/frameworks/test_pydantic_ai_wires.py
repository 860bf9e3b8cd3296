"""The pydantic-ai processor on OpenAI Responses (reasoning) and Anthropic (thinking), strict server."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import anthropic
import contextledger
import openai
import pytest

pytest.importorskip("pydantic_ai")

from contextledger.adapters.frameworks.pydantic_ai import ContextLedgerHistory
from pydantic_ai import Agent
from pydantic_ai.models.anthropic import AnthropicModel, AnthropicModelSettings
from pydantic_ai.models.openai import OpenAIResponsesModel, OpenAIResponsesModelSettings
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider

sys.path.insert(0, str(Path(__file__).parents[1] / "providers"))
from strict_server import Turn, strict_server

BUDGET = 3_000
BIG = "".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(400))
SCRIPT = [
    Turn(thinking="Read the big file first.", calls=(("read_file", {"path": "big.txt"}),)),
    Turn(thinking="Then a command.", calls=(("run", {"command": "ls"}), ("run", {"command": "pwd"}))),
    Turn(text="Done with the first task."),
]


def read_file(path: str) -> str:
    """Read a file (big.txt is large)."""
    return BIG if path == "big.txt" else "small"


def run(command: str) -> str:
    """Run a shell command."""
    return f"ran {command}: exit code 0"


def _agent(provider: str, client: Any, history: ContextLedgerHistory) -> Agent[None, str]:
    if provider == "anthropic":
        model: Any = AnthropicModel("claude-strict", provider=AnthropicProvider(anthropic_client=client))
        settings: Any = AnthropicModelSettings(
            anthropic_thinking={"type": "enabled", "budget_tokens": 1024}, max_tokens=2048
        )
    else:
        model = OpenAIResponsesModel(
            "gpt-5", provider=OpenAIProvider(openai_client=client)
        )  # a reasoning model
        settings = OpenAIResponsesModelSettings(
            openai_store=False, openai_reasoning_effort="low", openai_send_reasoning_ids=True
        )
    return Agent(model, tools=[read_file, run], model_settings=settings, **history.agent_options())


async def _run(provider: str, url: str, history: ContextLedgerHistory) -> Any:
    """One run on the SDK's async client, closed afterwards."""
    sdk = (
        anthropic.AsyncAnthropic(base_url=url, api_key="x", max_retries=0)
        if provider == "anthropic"
        else openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
    )
    async with sdk as client:
        return await _agent(provider, client, history).run("How long is big.txt?")


@pytest.mark.parametrize("provider", ["openai-responses", "anthropic"])
def test_pydantic_ai_sends_reasoning_back_within_budget_and_every_call_replays(provider, tmp_path):
    """Reasoning sent back by each provider's rules: accepted, within budget, every call replays.

    The strict server accepts every request (thinking / encrypted reasoning sent back) within budget
    by its own count; each call is audited in the model's wire and replays as recorded.
    """
    with (
        strict_server(SCRIPT, budget=BUDGET) as server,
        contextledger.open_ledger(f"sqlite:///{tmp_path / 'l.db'}") as ledger,
    ):
        history = ContextLedgerHistory.start(ledger, system_prompt="You read files.", budget=BUDGET)
        result = asyncio.run(_run(provider, server.url, history))
        history.record(result.new_messages())
        assert result.output == "Done with the first task."
        assert [e.problems for e in server.exchanges] == [[]] * len(SCRIPT)
        assert max(e.tokens for e in server.exchanges) <= BUDGET
        views = contextledger.CallRecorder(ledger).calls(history.session_id)
        assert len(views) == len(server.exchanges)
        for view, exchange in zip(views, server.exchanges, strict=True):
            assert view.record.wire_format == provider
            replayed = contextledger.replay_call(ledger, view.record.call_id, history.session_id)
            assert replayed.payload_sha == view.record.payload_sha
            assert view.usage is not None
            assert view.usage.input_tokens == exchange.tokens
    assert server.thinking if provider == "anthropic" else server.reasoning
