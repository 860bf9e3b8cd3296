"""A pydantic-ai history processor: the run's messages recorded, the model shown the rendered context."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import Any, Self

from contextledger.adapters.frameworks.pydantic_ai_media import prompt_message
from contextledger.adapters.frameworks.pydantic_ai_wires import MARK, from_wire, provider_of, reply_of
from contextledger.adapters.providers.agent import provider_format
from contextledger.adapters.providers.openai_chat import OpenAIChatFormat
from contextledger.application.agent.agent_loop import AgentLoop
from contextledger.application.agent.agent_types import ProviderFormat
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.render.renderer import Renderer
from contextledger.projections.policy import Policy
from pydantic_ai import RunContext
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    ToolReturnPart,
    UserPromptPart,
)

__all__ = ["MARK", "ContextLedgerHistory"]


class ContextLedgerHistory:
    """A pydantic-ai history processor: ``Agent(model, **history.agent_options())``.

    ``agent_options()`` is ``capabilities=[ProcessHistory(history)]`` on pydantic-ai 2 and
    ``history_processors=[history]`` on pydantic-ai 1 (the processor is the same callable).

    Before each model request it appends the run's messages not yet recorded (user prompts, tool
    returns and retries, the model's replies with their usage) and returns the session's rendered,
    token-budgeted context as pydantic-ai messages, recording the call's audit record in the wire of
    the run's model: Anthropic Messages (signed thinking of the current tool-use turn kept as
    ``ThinkingPart`` with its signature), OpenAI Responses (encrypted reasoning items as
    ``ThinkingPart`` with id and signature), else Chat Completions. pydantic-ai makes a processor's
    output the run's history, so ``result.all_messages()`` holds the rendered context and what
    followed; the ledger holds everything. A message is known by a mark in its ``metadata`` (kept
    when messages are serialized), so handing the same history back, in this process or another,
    writes nothing twice.
    The reply that ends a run comes after the last request: record it with ``record(result.new_messages())``.

    Args:
        ledger: The ledger holding the session.
        session_id: The session (``start`` begins one).
        policy: A preset name or a ``Policy``.
        budget: Tokens a model request may hold (default: the policy's).
        renderer: A renderer to share.
        provider: The wire (``openai``, ``openai-responses``, ``anthropic``); default: the model's own.
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
        self.provider = None if provider is None else provider_format(provider)
        self.loop = AgentLoop(
            ledger,
            session_id,
            self.provider or OpenAIChatFormat(),
            policy=policy,
            budget=budget,
            renderer=renderer,
            driver="ContextLedgerHistory",
        )
        self._pending: str | None = None
        """The call id of the request rendered last, whose reply is not recorded yet."""
        self._lock = threading.RLock()

    @classmethod
    def start(
        cls,
        ledger: Ledger,
        *,
        policy: Policy | str = "default",
        budget: int | None = None,
        provider: str | ProviderFormat | None = None,
        **session: Any,
    ) -> Self:
        """Start a session (``Ledger.start_session`` options) and return its history processor."""
        session_id = ledger.start_session(**session)
        return cls(ledger, session_id, policy=policy, budget=budget, provider=provider)

    @property
    def session_id(self) -> str:
        """The ledger session."""
        return self.loop.session_id

    def agent_options(self) -> dict[str, Any]:
        """The ``Agent`` keyword arguments installing this processor, for the installed pydantic-ai."""
        try:
            from pydantic_ai.capabilities import ProcessHistory  # noqa: PLC0415 - pydantic-ai 2 only
        except ImportError:  # pragma: no cover - pydantic-ai 1
            return {"history_processors": [self]}
        return {"capabilities": [ProcessHistory(self)]}

    def __call__(self, ctx: RunContext[Any], messages: list[ModelMessage]) -> list[ModelMessage]:
        """Record the new messages; return the rendered context to send instead of ``messages``."""
        with self._lock:
            self.record(messages)
            self.loop.provider = self.provider or provider_of(ctx.model)
            request = self.loop.request()
            self._pending = request.call_id
            wire = self.loop.provider.wire_format
            rendered = from_wire(wire, request.arguments, f"rendered:{request.call_id}")
            if rendered and not request.context.system:
                rendered[0] = _with_system(rendered[0], _system_parts(messages))
            return rendered

    def record(self, messages: Iterable[ModelMessage]) -> int:
        """Append the messages not yet recorded, each once (marking them); return how many were new.

        A reply of the model is joined, with its usage, to the request rendered last.
        """
        new = 0
        with self._lock:
            for message in messages:
                if (message.metadata or {}).get(MARK):
                    continue
                mark = self.loop.ledger.ids.new_id()
                if isinstance(message, ModelResponse):
                    self._record_reply(message, mark)
                else:
                    self._record_request(message, mark)
                message.metadata = {**(message.metadata or {}), MARK: mark}
                new += 1
        return new

    def _record_reply(self, message: ModelResponse, mark: str) -> None:
        if self._pending is not None:
            call_id, self._pending = self._pending, None
            self.loop.record_response(call_id, reply_of(self.loop.provider.wire_format, message, mark))
        else:  # a reply made before this processor saw the conversation
            reply = reply_of("openai", message, mark)
            self.loop.ledger.append_many(
                self.session_id, [reply["choices"][0]["message"]], idempotency_key=f"pai:{mark}"
            )

    def _record_request(self, message: ModelRequest, mark: str) -> None:
        meta = {MARK: mark}
        for index, part in enumerate(message.parts):
            key = f"pai:{mark}:{index}"
            if isinstance(part, UserPromptPart):
                content = [part.content] if isinstance(part.content, str) else part.content
                self.loop.add_user_message(prompt_message(content, meta), idempotency_key=key)
            elif isinstance(part, ToolReturnPart):
                result = {"role": "tool", "tool_call_id": part.tool_call_id, "name": part.tool_name}
                self.loop.record_tool_result(
                    {**result, "content": part.model_response_str(), "meta": meta}, idempotency_key=key
                )
            elif isinstance(part, RetryPromptPart):
                text = part.model_response()
                if part.tool_name is not None:
                    result = {"role": "tool", "tool_call_id": part.tool_call_id, "name": part.tool_name}
                    self.loop.record_tool_result(
                        {**result, "content": text, "is_error": True, "meta": meta}, idempotency_key=key
                    )
                else:
                    self.loop.add_user_message(
                        {"role": "user", "content": text, "meta": meta}, idempotency_key=key
                    )
            # SystemPromptPart: the session's system prompt is given at its start


def _system_parts(messages: Sequence[ModelMessage]) -> list[SystemPromptPart]:
    """The agent's own system prompt parts (used when the session has no system prompt)."""
    for message in messages:
        if isinstance(message, ModelRequest):
            return [p for p in message.parts if isinstance(p, SystemPromptPart)]
    return []


def _with_system(first: ModelMessage, system: list[SystemPromptPart]) -> ModelMessage:
    if not system or not isinstance(first, ModelRequest):
        return first
    return ModelRequest(parts=[*system, *first.parts], metadata=first.metadata)
