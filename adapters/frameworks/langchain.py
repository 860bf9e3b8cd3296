"""A LangChain v1 agent middleware: the agent's messages recorded, the model shown the rendered context."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Self

from contextledger.adapters.frameworks.langchain_responses import from_responses
from contextledger.adapters.frameworks.langchain_wires import LANGCHAIN_ID, from_wire, provider_of, reply_of
from contextledger.adapters.frameworks.reply_meta import ReplyMeta
from contextledger.adapters.providers.agent import provider_format
from contextledger.adapters.providers.openai_chat import OpenAIChatFormat
from contextledger.application.agent.agent_loop import AgentLoop
from contextledger.application.agent.agent_types import ProviderFormat
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.render.renderer import Renderer
from contextledger.domain.events import AssistantMessageAdded, ToolResultRecorded, UserMessageAdded
from contextledger.projections.policy import Policy
from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_openai_messages,
)
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.runtime import Runtime

__all__ = ["LANGCHAIN_ID", "ContextLedgerMiddleware"]


class ContextLedgerMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """The context layer of a LangChain ``create_agent`` loop.

    ``before_model`` appends the agent's new messages (user input, tool results) to the ledger, each
    once: a message is known by its LangChain ``id`` (kept in the ledger message's ``meta``, and the
    idempotency key ``lc:<id>``), so a re-run from a checkpoint or a second middleware on the same
    session writes nothing twice. ``wrap_model_call`` then sends the model the session's rendered,
    token-budgeted context in place of the whole history (the agent's state keeps the whole
    history), records the call's audit record in the wire of the model in use (Anthropic Messages
    for ``ChatAnthropic``, signed thinking blocks of the current tool-use turn sent back; OpenAI Chat
    Completions otherwise), and records the model's reply with its usage and latency. The tools
    sent are the session's schemas, as rendered and counted.

    Example::

        middleware = ContextLedgerMiddleware.start(ledger, system_prompt="...", tools=tools, budget=8000)
        agent = create_agent(model, tools=tools, middleware=[middleware])

    Args:
        ledger: The ledger holding the session.
        session_id: The session (``start`` begins one).
        policy: A preset name or a ``Policy``.
        budget: Tokens a model call may hold (default: the policy's).
        renderer: A renderer to share.
        provider: The wire (``openai``, ``anthropic`` or a format); default: the model's own.
    """

    def __init__(
        self,
        ledger: Ledger,
        session_id: str,
        *,
        policy: Policy | str = "default",
        budget: int | None = None,
        renderer: Renderer | None = None,
        provider: str | ProviderFormat | None = None,
    ) -> None:
        super().__init__()
        self.provider = None if provider is None else provider_format(provider)
        self.loop = AgentLoop(
            ledger,
            session_id,
            self.provider or OpenAIChatFormat(),
            policy=policy,
            budget=budget,
            renderer=renderer,
            driver="ContextLedgerMiddleware",
        )
        self._known: set[str] | None = None
        self._known_lock = threading.RLock()

    @classmethod
    def start(
        cls,
        ledger: Ledger,
        *,
        tools: Iterable[Any] = (),
        policy: Policy | str = "default",
        budget: int | None = None,
        provider: str | ProviderFormat | None = None,
        **session: Any,
    ) -> Self:
        """Start a session (``Ledger.start_session`` options) and return its middleware.

        ``tools`` may be LangChain tools (or anything ``convert_to_openai_tool`` takes): their schemas
        are counted in the budget like the model will see them.
        """
        schemas = [convert_to_openai_tool(tool) for tool in tools]
        session_id = ledger.start_session(tools=schemas, **session)
        return cls(ledger, session_id, policy=policy, budget=budget, provider=provider)

    @property
    def session_id(self) -> str:
        """The ledger session."""
        return self.loop.session_id

    # -- hooks ---------------------------------------------------------------------------------

    def before_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Append the agent's messages not yet in the ledger (each once); change nothing in the state."""
        del runtime
        self.record_messages(state["messages"])
        return None

    async def abefore_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """See ``before_model`` (the ledger write runs in a worker thread)."""
        del runtime
        await asyncio.to_thread(self.record_messages, state["messages"])
        return None

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        """Send the model the rendered context; record the call and its reply."""
        self.record_messages(request.messages)
        call_id, rendered = self._rendered(request)
        started = time.perf_counter()
        response = handler(rendered)
        return self._recorded(call_id, response, (time.perf_counter() - started) * 1000)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        """See ``wrap_model_call``."""
        await asyncio.to_thread(self.record_messages, request.messages)
        call_id, rendered = await asyncio.to_thread(self._rendered, request)
        started = time.perf_counter()
        response = await handler(rendered)
        latency = (time.perf_counter() - started) * 1000
        return await asyncio.to_thread(self._recorded, call_id, response, latency)

    # -- recording -----------------------------------------------------------------------------

    def record_messages(self, messages: Sequence[BaseMessage]) -> int:
        """Append the messages the ledger has not seen (by LangChain id); return how many were new.

        System messages are the session's (given at its start) and are not appended; a message
        without an id cannot be told apart from a copy of itself and is not appended either.
        """
        new = 0
        with self._known_lock:
            known = self._known_ids()
            for message in messages:
                if isinstance(message, SystemMessage) or not message.id or message.id in known:
                    continue
                self._append(message)
                known.add(message.id)
                new += 1
        return new

    def _append(self, message: BaseMessage) -> None:
        wire = convert_to_openai_messages(message)
        wire = {k: v for k, v in wire.items() if k not in {"name", "id"} or isinstance(message, ToolMessage)}
        wire["meta"] = {LANGCHAIN_ID: message.id}
        key = f"lc:{message.id}"
        if isinstance(message, ToolMessage):
            wire["is_error"] = message.status == "error"  # the Chat Completions shape has no error flag
            self.loop.record_tool_result(wire, idempotency_key=key)
        elif isinstance(message, HumanMessage):
            self.loop.add_user_message(wire, idempotency_key=key)
        elif isinstance(message, AIMessage):  # a reply made outside this middleware
            self.loop.ledger.append_many(self.session_id, [wire], idempotency_key=key)
        else:
            self.loop.add_user_message({**wire, "role": "user"}, idempotency_key=key)

    def _known_ids(self) -> set[str]:
        """LangChain ids of the messages already in the session (read from the ledger once)."""
        if self._known is None:
            known: set[str] = set()
            for recorded in self.loop.ledger.events(self.session_id):
                event = recorded.event
                if isinstance(event, UserMessageAdded | AssistantMessageAdded | ToolResultRecorded):
                    lc_id = event.meta.get(LANGCHAIN_ID)
                    if isinstance(lc_id, str):
                        known.add(lc_id)
            self._known = known
        return self._known

    def _rendered(self, request: ModelRequest[Any]) -> tuple[str, ModelRequest[Any]]:
        with self._known_lock:
            self.loop.provider = ReplyMeta(self.provider or provider_of(request.model))
            agent_request = self.loop.request()
        arguments = agent_request.arguments
        changes: dict[str, Any]
        if self.loop.provider.wire_format == "openai-responses":  # instructions as the model setting
            rendered, settings = from_responses(arguments)
            changes = {"messages": rendered, "system_message": None}
            changes["model_settings"] = {**request.model_settings, **settings}
        else:
            system, messages = from_wire(self.loop.provider.wire_format, arguments)
            changes = {"messages": messages, "system_message": system or request.system_message}
        if "tools" in arguments:
            changes["tools"] = arguments["tools"]
        return agent_request.call_id, request.override(**changes)

    def _recorded(self, call_id: str, response: ModelResponse[Any], latency_ms: float) -> ModelResponse[Any]:
        result = list(response.result)
        for index, original in enumerate(result):
            if isinstance(original, AIMessage):
                reply = original
                if not reply.id:  # give it the id the agent's state will keep, to know it again
                    reply = result[index] = original.model_copy(update={"id": f"lc-{call_id}"})
                with self._known_lock:
                    if isinstance(self.loop.provider, ReplyMeta):  # the reply known again by its id
                        self.loop.provider.meta = {LANGCHAIN_ID: reply.id}
                    wire = self.loop.provider.wire_format
                    self.loop.record_response(call_id, reply_of(wire, reply), latency_ms=latency_ms)
                    self._known_ids().add(str(reply.id))
                break
        return ModelResponse(result=result, structured_response=response.structured_response)
