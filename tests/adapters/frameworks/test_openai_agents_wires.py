"""The OpenAI Agents SDK adapter through the strict server: Responses (reasoning) and Chat Completions."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import contextledger
import openai
import pytest

pytest.importorskip("agents")

from agents import (
    Agent,
    ModelSettings,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from contextledger.adapters.frameworks.openai_agents import ContextLedgerAgents
from contextledger.application.audit.call_recorder import payload_sha
from openai.types.shared import Reasoning

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
KEYS = {"openai-responses": ("instructions", "input", "tools"), "openai": ("messages", "tools")}


@function_tool
def read_file(path: str) -> str:
    """Read a file (big.txt is large).

    Args:
        path: The file.
    """
    return BIG if path == "big.txt" else "small"


@function_tool
def run(command: str) -> str:
    """Run a shell command.

    Args:
        command: The command line.
    """
    return f"ran {command}: exit code 0"


def _agent(wire: str, client: openai.AsyncOpenAI) -> Agent[Any]:
    if wire == "openai":
        return Agent(
            name="reader",
            instructions="You read files.",
            tools=[read_file, run],
            model=OpenAIChatCompletionsModel(model="gpt-strict", openai_client=client),
            model_settings=ModelSettings(include_usage=True),  # a streamed Chat reply's usage
        )
    settings = ModelSettings(
        store=False, reasoning=Reasoning(effort="low"), response_include=["reasoning.encrypted_content"]
    )
    return Agent(
        name="reader",
        instructions="You read files.",
        tools=[read_file, run],
        model=OpenAIResponsesModel(model="gpt-strict", openai_client=client),
        model_settings=settings,
    )


async def _run(agent: Agent[Any], given: Any, options: dict[str, Any], *, streamed: bool) -> Any:
    """``Runner.run``, or ``Runner.run_streamed`` with its events consumed."""
    if not streamed:
        return await Runner.run(agent, given, **options)
    result = Runner.run_streamed(agent, given, **options)
    async for _ in result.stream_events():
        pass
    return result


async def _two_runs(
    wire: str, url: str, ledger: Any, *, streamed: bool
) -> tuple[ContextLedgerAgents, list[str]]:
    """Two runs of a tool-using agent: the second is handed the first's whole history."""
    async with openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0) as client:
        agent = _agent(wire, client)
        ctx = ContextLedgerAgents.start(ledger, agent=agent, budget=BUDGET)
        options = ctx.run_options(tracing_disabled=True)
        first = await _run(agent, "How long is big.txt?", options, streamed=streamed)
        history = [*first.to_input_list(), {"role": "user", "content": "and the date?"}]
        second = await _run(agent, history, options, streamed=streamed)
        # another adapter on the session (another process) knows every item, the replies' included
        assert ContextLedgerAgents(ledger, ctx.session_id).record_items(second.to_input_list()) == 0
        return ctx, [str(first.final_output), str(second.final_output)]


@pytest.fixture(autouse=True)
def _no_tracing():
    """No trace export is attempted (no network, nothing printed)."""
    set_tracing_disabled(disabled=True)
    yield
    set_tracing_disabled(disabled=False)


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
@pytest.mark.parametrize("wire", ["openai-responses", "openai"])
def test_agents_sdk_runs_within_budget_send_reasoning_back_and_every_call_replays(wire, streamed, tmp_path):
    """Two Agents SDK runs with tools (plain or streamed) through the strict server: accepted, in budget.

    The input filter renders every model call of both runs (5 calls); the server accepts each
    (encrypted reasoning items of the current tool-use turn sent back on Responses) within budget
    by its own count, although big.txt alone is over the budget; each call is audited in the
    model's wire, its usage joined from ``on_llm_end``, and replays byte for byte as it was sent
    (the tools with the SDK's ``strict`` flag included). Another adapter on the session, handed
    the whole history, writes nothing.
    """
    with (
        strict_server(SCRIPT, budget=BUDGET) as server,
        contextledger.open_ledger(f"sqlite:///{tmp_path / 'l.db'}") as ledger,
    ):
        ctx, outputs = asyncio.run(_two_runs(wire, server.url, ledger, streamed=streamed))
        assert outputs == ["Done with the first task.", "All done."]
        assert [e.problems for e in server.exchanges] == [[]] * len(SCRIPT)
        assert max(e.tokens for e in server.exchanges) <= BUDGET
        views = contextledger.CallRecorder(ledger).calls(ctx.session_id)
        assert len(views) == len(server.exchanges)
        for view, exchange in zip(views, server.exchanges, strict=True):
            assert view.record.wire_format == wire
            sent = {k: exchange.body[k] for k in KEYS[wire] if k in exchange.body}
            replayed = contextledger.replay_call(ledger, view.record.call_id, ctx.session_id)
            assert replayed.payload == sent
            assert replayed.payload_sha == view.record.payload_sha == payload_sha(sent)
            assert view.usage is not None
            assert view.usage.input_tokens == exchange.tokens
        texts = [e.event for e in ledger.events(ctx.session_id)]
        users = [e for e in texts if type(e).__name__ == "UserMessageAdded"]
        assert len(users) == 2  # the second run's history was not written twice
    if wire == "openai-responses":
        assert server.reasoning
