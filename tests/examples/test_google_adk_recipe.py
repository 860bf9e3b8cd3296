"""The Google ADK recipe (examples/google_adk_callbacks.py) in a real ADK run, on a scripted model."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import contextledger
import pytest

pytest.importorskip("google.adk")

from google.adk.agents import LlmAgent
from google.adk.models import BaseLlm, LlmRequest, LlmResponse
from google.adk.runners import InMemoryRunner
from google.genai import types
from pydantic import Field

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from google_adk_callbacks import AdkContext

BUDGET = 2_000
BIG = "".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(400))


class ScriptedGemini(BaseLlm):
    """A model double: replies in order (function calls without ids, as Gemini), keeps each request."""

    replies: list[types.Content]
    requests: list[LlmRequest] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(llm_request.model_copy(deep=True))
        usage = types.GenerateContentResponseUsageMetadata(prompt_token_count=100 + len(self.requests))
        usage.candidates_token_count = 5
        yield LlmResponse(content=self.replies[len(self.requests) - 1], usage_metadata=usage)


def read_file(path: str) -> str:
    """Read a file (big.txt is large)."""
    return BIG if path == "big.txt" else "small"


def _call(name: str, **args: Any) -> types.Part:
    return types.Part(function_call=types.FunctionCall(name=name, args=args))


def _run(
    ledger: contextledger.Ledger, model: ScriptedGemini, question: str
) -> tuple[contextledger.AgentContext, list[Any]]:
    """One ADK run of a reader agent under the recipe, asked ``question``; its context and ADK's events."""
    tools = [{"name": "read_file", "description": "Read a file.", "parameters": {"path": {"type": "string"}}}]
    agent_context = contextledger.AgentContext.start(
        ledger, provider="openai", system_prompt="You read files.", tools=tools, budget=BUDGET
    )
    recipe = AdkContext(agent_context)
    agent = LlmAgent(name="reader", model=model, tools=[read_file], **recipe.callbacks())

    async def run() -> list[Any]:
        runner = InMemoryRunner(agent=agent, app_name="recipe")
        session = await runner.session_service.create_session(app_name="recipe", user_id="u")
        asked = types.Content(role="user", parts=[types.Part(text=question)])
        return [e async for e in runner.run_async(user_id="u", session_id=session.id, new_message=asked)]

    return agent_context, asyncio.run(run())


def test_adk_callbacks_send_the_budgeted_context_and_record_every_call():
    """An ADK agent reading a file bigger than the budget: each model request holds the rendered context.

    Every request the model gets is the session's render (the big result cut to fit), each call has
    its audit record with the reply's usage joined, and the user's text and the tool's output are
    in the ledger once.
    """
    model = ScriptedGemini(
        model="scripted",
        replies=[
            types.Content(role="model", parts=[_call("read_file", path="big.txt")]),
            types.Content(role="model", parts=[types.Part(text="It has 400 lines.")]),
        ],
    )
    with contextledger.open_ledger("memory://") as ledger:
        agent_context, events = _run(ledger, model, "How long is big.txt?")
        assert events[-1].content.parts[0].text == "It has 400 lines."
        views = contextledger.CallRecorder(ledger).calls(agent_context.session_id)
        assert len(views) == len(model.requests) == 2
        for view, request in zip(views, model.requests, strict=True):
            assert view.record.tokens <= BUDGET
            assert view.usage is not None
            assert view.usage.input_tokens == 100 + model.requests.index(request) + 1
            sent = contextledger.replay_call(ledger, view.record.call_id, agent_context.session_id).payload
            assert request.config.system_instruction == "You read files."
            assert len(request.contents) == len(sent["messages"]) - 1
        responses = [p.function_response for c in model.requests[1].contents for p in c.parts or []]
        (response,) = [r for r in responses if r is not None]
        output = response.response["result"]
        assert len(output) < len(BIG)  # the render cut the result to fit the budget
        kinds = [type(e.event).__name__ for e in ledger.events(agent_context.session_id)]
        assert kinds.count("UserMessageAdded") == 1
        assert kinds.count("ToolResultRecorded") == 1


def test_adk_callbacks_record_each_content_once_over_many_compacted_steps():
    """Eight steps under a small budget: the rendered context is not as long as ADK's history.

    The recipe counted the contents it had recorded as the length of the rendered context it sent, not of
    ADK's history: once a compaction (or the session-state card) made them differ, it recorded contents
    twice or skipped them, and a function response recorded again (ADK strips its id) failed as a result
    of call ``None``.
    """
    steps = 8
    replies = [types.Content(role="model", parts=[_call("read_file", path="big.txt")]) for _ in range(steps)]
    done = types.Content(role="model", parts=[types.Part(text="Done.")])
    model = ScriptedGemini(model="scripted", replies=[*replies, done])
    with contextledger.open_ledger("memory://") as ledger:
        agent_context, events = _run(ledger, model, "Read big.txt eight times")
        assert events[-1].content.parts[0].text == "Done."
        assert len(model.requests) == steps + 1
        history = [1 + 2 * step for step in range(steps + 1)]  # the question, then a call and its response
        assert [len(r.contents) for r in model.requests] != history, "every render as long as the history"
        kinds = [type(e.event).__name__ for e in ledger.events(agent_context.session_id)]
        assert kinds.count("UserMessageAdded") == 1
        assert kinds.count("ToolResultRecorded") == steps
