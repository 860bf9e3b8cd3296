"""The LangChain v1 middleware: a create_agent loop on a fake model sees the budgeted context, recorded."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import contextledger
import pytest

pytest.importorskip("langchain.agents")

from contextledger.adapters.frameworks.langchain import LANGCHAIN_ID, ContextLedgerMiddleware
from contextledger.application.audit.call_recorder import CallRecorder
from contextledger.domain.events import AssistantMessageAdded, ToolResultRecorded, UserMessageAdded
from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatResult
from langchain_core.tools import tool
from pydantic import Field

BIG = "\n".join(f"line {i}: the quick brown fox jumps over the lazy dog" for i in range(3000))
BUDGET = 3000


class ScriptedModel(FakeMessagesListChatModel):
    """LangChain's fake list model, bindable to tools, keeping every message list it was sent."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedModel:  # type: ignore[override]
        """The scripted replies name the tools themselves."""
        del tools, kwargs
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.seen.append(list(messages))
        return super()._generate(messages, stop, run_manager, **kwargs)


@tool
def read_file(path: str) -> str:
    """Read a file (this one is large)."""
    return BIG if path == "big.txt" else f"no such file: {path}"


def _usage(inp: int, out: int) -> Any:
    return {"input_tokens": inp, "output_tokens": out, "total_tokens": inp + out}


def _script() -> list[BaseMessage]:
    return [
        AIMessage(
            content="",
            tool_calls=[{"id": "call_1", "name": "read_file", "args": {"path": "big.txt"}}],
            usage_metadata=_usage(120, 10),
        ),
        AIMessage(content="it has 3000 lines", usage_metadata=_usage(900, 6)),
        AIMessage(
            content="",
            tool_calls=[{"id": "call_1", "name": "read_file", "args": {"path": "small.txt"}}],  # a reused id
            usage_metadata=_usage(950, 10),
        ),
        AIMessage(content="small.txt does not exist", usage_metadata=_usage(990, 7)),
    ]


def _kinds(ledger: contextledger.Ledger, session_id: str) -> list[str]:
    names = {UserMessageAdded: "user", AssistantMessageAdded: "assistant", ToolResultRecorded: "tool"}
    return [names[type(r.event)] for r in ledger.events(session_id) if type(r.event) in names]


def _agent(ledger: contextledger.Ledger) -> tuple[Any, ScriptedModel, ContextLedgerMiddleware]:
    middleware = ContextLedgerMiddleware.start(
        ledger, system_prompt="You read files.", tools=[read_file], budget=BUDGET
    )
    model = ScriptedModel(responses=_script())
    agent = create_agent(model, tools=[read_file], system_prompt="You read files.", middleware=[middleware])
    return agent, model, middleware


def test_agent_loop_model_sees_budgeted_context_and_ledger_records_each_message_once(
    ledger: contextledger.Ledger,
) -> None:
    """A tool-using create_agent run: the state keeps the big output, the model sees it within budget."""
    agent, model, middleware = _agent(ledger)
    result = agent.invoke({"messages": [{"role": "user", "content": "How long is big.txt?"}]})
    assert result["messages"][-1].content == "it has 3000 lines"
    assert any(isinstance(m, ToolMessage) and m.content == BIG for m in result["messages"])
    assert _kinds(ledger, middleware.session_id) == ["user", "assistant", "tool", "assistant"]
    second_call = model.seen[1]
    assert isinstance(second_call[0], SystemMessage)
    assert second_call[0].content == "You read files."
    (tool_message,) = [m for m in second_call if isinstance(m, ToolMessage)]
    assert len(str(tool_message.content)) < len(BIG) // 4  # the budgeted projection, not the output
    calls = CallRecorder(ledger).calls(middleware.session_id)
    assert len(calls) == 2
    assert all(c.record.tokens <= BUDGET for c in calls)
    assert [(c.usage.input_tokens, c.usage.output_tokens) for c in calls if c.usage] == [(120, 10), (900, 6)]
    assert all(c.usage is not None and c.usage.latency_ms is not None for c in calls)


def test_continuing_the_conversation_appends_only_new_messages(ledger: contextledger.Ledger) -> None:
    """The next turn hands the whole state back: only the new user message and replies are appended."""
    agent, model, middleware = _agent(ledger)
    first = agent.invoke({"messages": [{"role": "user", "content": "How long is big.txt?"}]})
    second = agent.invoke({"messages": [*first["messages"], HumanMessage("and small.txt?")]})
    assert second["messages"][-1].content == "small.txt does not exist"
    kinds = _kinds(ledger, middleware.session_id)
    assert kinds == ["user", "assistant", "tool", "assistant", "user", "assistant", "tool", "assistant"]
    assert len(model.seen) == 4
    ids = [
        r.event.meta.get(LANGCHAIN_ID)
        for r in ledger.events(middleware.session_id)
        if isinstance(r.event, UserMessageAdded | AssistantMessageAdded | ToolResultRecorded)
    ]
    assert ids == [m.id for m in second["messages"]]
    last = [m for m in model.seen[3] if isinstance(m, ToolMessage)][-1]
    assert last.content == "no such file: small.txt"
    assert len(CallRecorder(ledger).calls(middleware.session_id)) == 4


def test_a_new_middleware_on_the_same_session_writes_nothing_twice(ledger: contextledger.Ledger) -> None:
    """A restarted process (a fresh middleware) finds the recorded messages by their LangChain ids."""
    agent, _model, middleware = _agent(ledger)
    result = agent.invoke({"messages": [{"role": "user", "content": "How long is big.txt?"}]})
    version = ledger.version(middleware.session_id)
    again = ContextLedgerMiddleware(ledger, middleware.session_id, budget=BUDGET)
    assert again.record_messages(result["messages"]) == 0
    assert ledger.version(middleware.session_id) == version


def test_async_agent_loop_records_the_same(ledger: contextledger.Ledger) -> None:
    """``ainvoke`` goes through the async hooks and records the same messages and calls."""
    agent, _model, middleware = _agent(ledger)
    result = asyncio.run(agent.ainvoke({"messages": [{"role": "user", "content": "How long is big.txt?"}]}))
    assert result["messages"][-1].content == "it has 3000 lines"
    assert _kinds(ledger, middleware.session_id) == ["user", "assistant", "tool", "assistant"]
    assert len(CallRecorder(ledger).calls(middleware.session_id)) == 2


def test_a_failing_tool_is_recorded_as_an_error():
    """A tool that raised (``ToolMessage(status="error")``) is stored as an error result.

    The middleware went through the Chat Completions shape, which has no error flag: the failure was stored
    as a success, and the Anthropic wire sent its ``tool_result`` without ``is_error``.
    """

    @tool
    def flaky(path: str) -> str:
        """Read a file; one of them fails."""
        from langchain_core.tools import ToolException  # noqa: PLC0415

        if path == "bad":
            raise ToolException("disk on fire")
        return f"contents of {path}"

    flaky.handle_tool_error = True
    calls = [
        {"id": "c1", "name": "flaky", "args": {"path": "a"}},
        {"id": "c2", "name": "flaky", "args": {"path": "bad"}},
    ]
    model = ScriptedModel(responses=[AIMessage(content="", tool_calls=calls), AIMessage(content="done")])
    ledger = contextledger.open_ledger("memory://")
    middleware = ContextLedgerMiddleware.start(
        ledger, system_prompt="You read files.", tools=[flaky], budget=BUDGET
    )
    agent = create_agent(model, tools=[flaky], system_prompt="You read files.", middleware=[middleware])
    agent.invoke({"messages": [{"role": "user", "content": "read a and bad"}]})
    results = {
        r.event.call_id: r.event.is_error
        for r in ledger.events(middleware.session_id)
        if isinstance(r.event, ToolResultRecorded)
    }
    assert results == {"c1": False, "c2": True}
