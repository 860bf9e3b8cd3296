"""The LangChain middleware on ChatOpenAI(use_responses_api=True) through the strict server."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import contextledger
import pytest

pytest.importorskip("langchain_openai")

from contextledger.adapters.frameworks.langchain import ContextLedgerMiddleware
from langchain.agents import create_agent
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


@tool
def read_file(path: str) -> str:
    """Read a file (big.txt is large)."""
    return BIG if path == "big.txt" else "small"


@tool
def run(command: str) -> str:
    """Run a shell command."""
    return f"ran {command}: exit code 0"


def _as_langchain_sends(item: dict[str, Any]) -> dict[str, Any]:
    """A recorded input item in the form ChatOpenAI gives it (the same text, its own item shape).

    ChatOpenAI sends a user message as a ``message`` item and assistant text as a ``message`` of
    ``output_text``; reasoning, function call and output items go as they are.
    """
    if item.get("role") == "user":
        return {"type": "message", **item}
    if item.get("role") == "assistant":
        text = [{"type": "output_text", "text": item["content"], "annotations": []}]
        return {"type": "message", "role": "assistant", "content": text}
    return item


def test_langchain_on_the_responses_api_sends_reasoning_back_within_budget_and_every_call_replays(tmp_path):
    """create_agent on ChatOpenAI(use_responses_api=True): Responses wire, reasoning items sent back.

    The strict server accepts every request of two invocations (the encrypted reasoning items of
    the current tool-use turn sent back) within budget by its own count; each call is audited in
    the Responses wire and replays exactly as recorded; what ChatOpenAI sent is that payload (the
    same instructions and tools), with its own item shape for user and assistant text. A second
    middleware on the session knows every message again by its LangChain id, replies included.
    """
    with (
        strict_server(SCRIPT, budget=BUDGET) as server,
        contextledger.open_ledger(f"sqlite:///{tmp_path / 'l.db'}") as ledger,
    ):
        model = ChatOpenAI(
            model="gpt-strict",
            base_url=f"{server.url}/v1",
            api_key="x",  # type: ignore[arg-type]
            max_retries=0,
            use_responses_api=True,
            store=False,
            include=["reasoning.encrypted_content"],
            reasoning={"effort": "low"},
        )
        middleware = ContextLedgerMiddleware.start(
            ledger, system_prompt="You read files.", tools=[read_file, run], budget=BUDGET
        )
        agent = create_agent(
            model, tools=[read_file, run], system_prompt="You read files.", middleware=[middleware]
        )
        first = agent.invoke({"messages": [{"role": "user", "content": "How long is big.txt?"}]})
        second = agent.invoke(
            {"messages": [*first["messages"], {"role": "user", "content": "and the date?"}]}
        )
        session = middleware.session_id
        # another middleware on the session (another process) knows every message, replies included
        assert ContextLedgerMiddleware(ledger, session).record_messages(second["messages"]) == 0
        assert [e.problems for e in server.exchanges] == [[]] * len(SCRIPT)
        assert max(e.tokens for e in server.exchanges) <= BUDGET
        views = contextledger.CallRecorder(ledger).calls(session)
        assert len(views) == len(server.exchanges)
        for view, exchange in zip(views, server.exchanges, strict=True):
            assert view.record.wire_format == "openai-responses"
            replayed = contextledger.replay_call(ledger, view.record.call_id, session)
            assert replayed.payload_sha == view.record.payload_sha
            assert exchange.body["instructions"] == replayed.payload["instructions"]
            assert exchange.body["tools"] == replayed.payload["tools"]
            assert exchange.body["input"] == [_as_langchain_sends(i) for i in replayed.payload["input"]]
            assert view.usage is not None
            assert view.usage.input_tokens == exchange.tokens
    assert server.reasoning
