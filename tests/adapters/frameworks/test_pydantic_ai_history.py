"""The pydantic-ai history processor: a tool-using run on FunctionModel or TestModel sees the budget."""

from __future__ import annotations

import asyncio

import contextledger
import pytest

pytest.importorskip("pydantic_ai")

from contextledger.adapters.frameworks.pydantic_ai import MARK, ContextLedgerHistory
from contextledger.application.audit.call_recorder import CallRecorder
from contextledger.domain.events import AssistantMessageAdded, ToolResultRecorded, UserMessageAdded
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RequestUsage

BIG = "\n".join(f"line {i}: the quick brown fox jumps over the lazy dog" for i in range(3000))
BUDGET = 3000


def read_file(path: str) -> str:
    """Read a file (this one is large)."""
    return BIG if path == "big.txt" else f"no such file: {path}"


class Scripted:
    """A FunctionModel script: read big.txt, then answer; keeps what the model was sent."""

    def __init__(self) -> None:
        self.seen: list[list[ModelMessage]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        """Call the tool first, then answer from its result."""
        del info
        self.seen.append(list(messages))
        last = messages[-1]
        returned = [p for p in last.parts if isinstance(p, ToolReturnPart)]
        usage = RequestUsage(input_tokens=100 * len(self.seen), output_tokens=5)
        if not returned:
            path = "big.txt" if len(self.seen) == 1 else "small.txt"
            call = ToolCallPart(tool_name="read_file", args={"path": path}, tool_call_id=f"t{len(self.seen)}")
            return ModelResponse(parts=[call], usage=usage, model_name="scripted")
        return ModelResponse(
            parts=[TextPart(f"read {len(returned[0].model_response_str())} chars")], usage=usage
        )


def _kinds(ledger: contextledger.Ledger, session_id: str) -> list[str]:
    names = {UserMessageAdded: "user", AssistantMessageAdded: "assistant", ToolResultRecorded: "tool"}
    return [names[type(r.event)] for r in ledger.events(session_id) if type(r.event) in names]


def _agent(ledger: contextledger.Ledger) -> tuple[Agent[None, str], Scripted, ContextLedgerHistory]:
    history = ContextLedgerHistory.start(ledger, system_prompt="You read files.", budget=BUDGET)
    script = Scripted()
    agent = Agent(FunctionModel(script), tools=[read_file], **history.agent_options())
    return agent, script, history


def test_run_sends_the_budgeted_context_and_records_every_message_once(ledger: contextledger.Ledger) -> None:
    """The model sees the session's system prompt and a cut tool output; the ledger has it all."""
    agent, script, history = _agent(ledger)
    result = asyncio.run(agent.run("How long is big.txt?"))
    assert history.record(result.new_messages()) == 1  # the final answer
    assert result.output.startswith("read ")
    second = script.seen[1]
    assert isinstance(second[0], ModelRequest)
    assert isinstance(second[0].parts[0], SystemPromptPart)
    assert second[0].parts[0].content == "You read files."
    (returned,) = [p for m in second for p in m.parts if isinstance(p, ToolReturnPart)]
    assert returned.tool_name == "read_file"
    assert len(returned.model_response_str()) < len(BIG) // 4
    assert _kinds(ledger, history.session_id) == ["user", "assistant", "tool", "assistant"]
    tool = next(r.event for r in ledger.events(history.session_id) if isinstance(r.event, ToolResultRecorded))
    assert len(ledger.text(tool.content)) >= len(BIG)  # the ledger keeps the whole output
    calls = CallRecorder(ledger).calls(history.session_id)
    assert len(calls) == 2
    assert all(c.record.tokens <= BUDGET for c in calls)
    assert [c.usage.input_tokens for c in calls if c.usage] == [100, 200]  # the last one by record()
    assert history.record(result.all_messages()) == 0


def test_history_handed_back_after_serialization_writes_nothing_twice(ledger: contextledger.Ledger) -> None:
    """A second run (another process: history through JSON, a fresh processor) appends only the new turn."""
    agent, script, history = _agent(ledger)
    first = asyncio.run(agent.run("How long is big.txt?"))
    history.record(first.new_messages())
    restored = ModelMessagesTypeAdapter.validate_json(
        ModelMessagesTypeAdapter.dump_json(first.all_messages())
    )
    again = ContextLedgerHistory(ledger, history.session_id, budget=BUDGET)
    agent2 = Agent(FunctionModel(script), tools=[read_file], **again.agent_options())
    second = asyncio.run(agent2.run("and small.txt?", message_history=restored))
    again.record(second.new_messages())
    kinds = _kinds(ledger, history.session_id)
    assert kinds == ["user", "assistant", "tool", "assistant", "user", "assistant", "tool", "assistant"]
    assert all((m.metadata or {}).get(MARK) for m in second.all_messages())
    assert len(CallRecorder(ledger).calls(history.session_id)) == 4


def test_test_model_calls_every_tool_and_all_is_recorded(ledger: contextledger.Ledger) -> None:
    """pydantic-ai's TestModel (calls each tool, then answers) runs through the processor."""
    history = ContextLedgerHistory.start(ledger, system_prompt="s", budget=BUDGET)
    agent = Agent(TestModel(), tools=[read_file], **history.agent_options())
    result = asyncio.run(agent.run("go"))
    history.record(result.new_messages())
    assert _kinds(ledger, history.session_id) == ["user", "assistant", "tool", "assistant"]
    assert len(CallRecorder(ledger).calls(history.session_id)) == 2
