"""The Agents SDK adapter's bookkeeping and the ledger Session's storage, on the SDK's scripted model."""

from __future__ import annotations

import asyncio
from typing import Any

import contextledger
import pytest

pytest.importorskip("agents")

from agents import Agent, Runner, set_tracing_disabled
from agents.testing import ScriptedModel
from contextledger.adapters.frameworks.openai_agents import ContextLedgerAgents
from contextledger.adapters.frameworks.openai_agents_session import ContextLedgerSession, generation_id
from contextledger.domain.events import AssistantMessageAdded, ToolResultRecorded, UserMessageAdded
from openai.types.responses import ResponseOutputMessage, ResponseOutputText


def _text(content: str, item_id: str) -> ResponseOutputMessage:
    part = ResponseOutputText(text=content, type="output_text", annotations=[], logprobs=[])
    return ResponseOutputMessage(
        id=item_id, type="message", role="assistant", content=[part], status="completed"
    )


def _texts(input_items: list[Any]) -> list[str]:
    return [str(item.get("content")) for item in input_items]


@pytest.fixture(autouse=True)
def _no_tracing():
    """No trace export is attempted (no network, nothing printed)."""
    set_tracing_disabled(disabled=True)
    yield
    set_tracing_disabled(disabled=False)


def test_the_ledger_is_the_memory_when_a_run_is_given_only_its_new_input():
    """Each run given only what the user says now: the model still sees the session's history.

    The second run's single input item is rendered after the first run's question and answer; the
    ledger holds each user message once, and the same words said again are a new message.
    """
    model = ScriptedModel()
    agent: Agent[Any] = Agent(name="a", instructions="Be brief.", model=model)
    with contextledger.open_ledger("memory://") as ledger:
        ctx = ContextLedgerAgents.start(ledger, agent=agent, budget=2_000)

        async def runs() -> None:
            for number, said in enumerate(["Where is the file?", "Thanks.", "Thanks."]):
                model.enqueue([_text(f"answer {number}", f"msg_{number}")])
                await Runner.run(agent, said, **ctx.run_options(tracing_disabled=True))

        asyncio.run(runs())
        last = model.calls[-1]
        assert last.system_instructions == "Be brief."
        assert _texts(last.input) == ["Where is the file?", "answer 0", "Thanks.", "answer 1", "Thanks."]
        users = [e.event for e in ledger.events(ctx.session_id) if isinstance(e.event, UserMessageAdded)]
        assert len(users) == 3
        views = contextledger.CallRecorder(ledger).calls(ctx.session_id)
        assert len(views) == 3
        assert all(v.usage is not None and v.record.wire_format == "openai-responses" for v in views)


def test_session_items_are_ledger_messages_and_a_pop_keeps_the_earlier_history():
    """Items become the ledger's messages; a pop forks the next generation and loses nothing.

    A function call is an assistant tool call, its output a tool result, a reasoning item an
    assistant message with its signature, an output answering no call is kept as JSON text; every
    item reads back exactly. After a pop, another instance on the same ledger reads the new
    generation, while the generation before the pop still holds the popped item.
    """
    items: list[Any] = [
        {"role": "user", "content": "weather?"},
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "look"}],
            "encrypted_content": "enc",
        },
        {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        {"type": "function_call_output", "call_id": "nobody", "output": "stray"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Sunny.", "annotations": []}],
        },
    ]
    with contextledger.open_ledger("memory://") as ledger:
        session = ContextLedgerSession("s1", ledger)
        asyncio.run(session.add_items(items))
        assert asyncio.run(session.get_items()) == items
        events = [e.event for e in ledger.events("s1")][1:]
        assert [type(e) for e in events] == [
            UserMessageAdded,
            AssistantMessageAdded,
            AssistantMessageAdded,
            ToolResultRecorded,
            AssistantMessageAdded,
            AssistantMessageAdded,
        ]
        assert events[1].reasoning_signature == "enc"
        assert events[2].tool_calls[0].id == "c1"
        assert ledger.text(events[5].content) == "Sunny."

        assert asyncio.run(session.pop_item()) == items[-1]
        other = ContextLedgerSession("s1", ledger)
        assert asyncio.run(other.get_items()) == items[:-1]
        assert other.ledger_session_id == generation_id("s1", 1)
        before = [e.event.meta.get("agents_session_item") for e in ledger.events("s1")][1:]
        assert before == items
        asyncio.run(other.clear_session())
        assert asyncio.run(session.get_items()) == []
        assert len(ledger.events(generation_id("s1", 1))) == len(items)  # 1 start + 5 items


def test_developer_items_are_left_out_and_a_second_adapter_knows_the_rest():
    """A developer or system item is not the ledger's; the items around it are recorded once.

    A second adapter on the session, handed the same input and one new message, records only the
    new message (the alignment leaves out the same items in every run).
    """
    first: list[Any] = [
        {"role": "developer", "content": "Answer in French."},
        {"type": "message", "role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]
    with contextledger.open_ledger("memory://") as ledger:
        ctx = ContextLedgerAgents.start(ledger, system_prompt="Be brief.")
        assert ctx.record_items(first) == 1
        again = ContextLedgerAgents(ledger, ctx.session_id)
        assert again.record_items([*first, {"role": "user", "content": "hi"}]) == 1
        users = [e.event for e in ledger.events(ctx.session_id) if isinstance(e.event, UserMessageAdded)]
        assert [ledger.text(u.content) for u in users] == ["hi", "hi"]
