"""``AgentContext``: the agent-loop API for a provider named by a word (``openai``, ``anthropic``...)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Self

from contextledger.adapters.providers.anthropic_messages import AnthropicFormat
from contextledger.adapters.providers.common import check_tool_names
from contextledger.adapters.providers.openai_chat import OpenAIChatFormat
from contextledger.adapters.providers.openai_responses import ResponsesFormat
from contextledger.adapters.providers.recorded_stream import AsyncRecordedStream, RecordedStream, failure_text
from contextledger.adapters.providers.streams import StreamAssembler
from contextledger.application.agent.agent_loop import AgentLoop, AsyncAgentLoop, check_settings
from contextledger.application.agent.agent_types import ProviderFormat, ToolCallRequest
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.render.renderer import Renderer
from contextledger.domain.errors import ConfigError, ValidationError
from contextledger.domain.events import ModelCallFailed
from contextledger.projections.policy import Policy

__all__ = ["PROVIDERS", "AgentContext", "AsyncAgentContext", "provider_format"]

PROVIDERS: Mapping[str, type[OpenAIChatFormat | AnthropicFormat | ResponsesFormat]] = {
    "openai": OpenAIChatFormat,
    "openai-chat": OpenAIChatFormat,
    "openai-responses": ResponsesFormat,
    "anthropic": AnthropicFormat,
}
"""Provider names and their wire formats."""


def provider_format(provider: str | ProviderFormat) -> ProviderFormat:
    """Return the wire format named ``provider`` (or ``provider`` itself when it is one)."""
    if not isinstance(provider, str):
        return provider
    try:
        return PROVIDERS[provider]()
    except KeyError:
        msg = f"unknown provider {provider!r}: use one of {', '.join(PROVIDERS)}"
        raise ConfigError(msg) from None


class AgentContext(AgentLoop):
    """The context layer of one session inside an agent loop on the OpenAI or Anthropic SDK.

    Example::

        agent = AgentContext.start(ledger, provider="openai", system_prompt="...", tools=[...])
        agent.add_user_message("task")
        request = agent.request()
        reply = client.chat.completions.create(model="gpt-4o", **request.arguments)
        for call in agent.record_response(request.call_id, reply):
            agent.record_tool_result(call.id, run(call.name, call.input))

    Args:
        ledger: The ledger holding the session.
        session_id: An existing session (see ``start`` to begin one).
        provider: ``openai`` (Chat Completions), ``openai-responses``, ``anthropic``, or a format.
        policy: A preset name or a ``Policy``.
        budget: Tokens a request may hold (default: the policy's).
        renderer: A renderer to share.
        retries: Attempts of a write that meets a concurrent writer.
    """

    def __init__(
        self,
        ledger: Ledger,
        session_id: str,
        *,
        provider: str | ProviderFormat = "openai",
        policy: Policy | str = "default",
        budget: int | None = None,
        renderer: Renderer | None = None,
        retries: int = 30,
    ) -> None:
        super().__init__(
            ledger,
            session_id,
            provider_format(provider),
            policy=policy,
            budget=budget,
            renderer=renderer,
            retries=retries,
        )

    @classmethod
    def start(
        cls,
        ledger: Ledger,
        *,
        provider: str | ProviderFormat = "openai",
        policy: Policy | str = "default",
        budget: int | None = None,
        **session: Any,
    ) -> Self:
        """Start a session (keyword arguments of ``Ledger.start_session``; tools in any provider's shape).

        The provider, policy, budget and tool names are checked first: one refused starts no session.
        """
        provider_format(provider)
        check_settings(policy, budget)
        check_tool_names(session.get("tools") or ())
        return cls(ledger, ledger.start_session(**session), provider=provider, policy=policy, budget=budget)

    def record_stream(self, call_id: str, stream: Any) -> RecordedStream:
        """Pass a streamed reply through, event by event, and record it when it ends.

        ``stream`` is what the SDK returned: a raw stream (``create(..., stream=True)``) or a stream
        manager (``client.messages.stream(...)``, ``client.chat.completions.stream(...)``,
        ``client.responses.stream(...)``; it is entered and closed here). Iterate the result as the
        stream itself; afterwards its ``tool_calls`` are the calls to run. A Chat stream reports
        usage only with ``stream_options={"include_usage": True}``. A stream that breaks off marks the
        call failed (``record_failure``) with the text that arrived, and the error propagates.
        """
        return RecordedStream(
            self.provider.wire_format,
            stream,
            lambda reply, latency: self.record_response(call_id, reply, latency_ms=latency),
            lambda error, arrived: self._failed(call_id, error, arrived),
        )

    def record_failure(self, call_id: str, error: BaseException | str) -> ModelCallFailed:
        """Mark a recorded call failed: the model call raised, or its reply never came whole.

        The audit keeps the call with the error (``CallView.failure``); the conversation is left as
        it was, so the call can be made again (a new ``request``). Marking it twice stores it once.

        Raises:
            ValidationError: the call's reply was recorded (``record_response``): the audit would say failed.
        """
        text = error if isinstance(error, str) else failure_text(error)
        with self._lock.lock:
            if self.recorder.call(self.session_id, call_id).usage is not None:
                msg = f"call {call_id!r} has its reply recorded (record_response): it did not fail"
                raise ValidationError(msg)
            return self._retry(lambda: self.recorder.report_failure(self.session_id, call_id, text))

    def _failed(self, call_id: str, error: str, arrived: StreamAssembler) -> None:
        partial = arrived.partial_text() or None
        with self._lock.lock:
            self._retry(
                lambda: self.recorder.report_failure(
                    self.session_id, call_id, error, partial_text=partial, events=arrived.events
                )
            )


class AsyncAgentContext(AsyncAgentLoop):
    """``AgentContext`` for asyncio: the same methods, awaited (each runs in a worker thread)."""

    def __init__(self, ledger: Ledger, session_id: str, **options: Any) -> None:
        super().__init__(AgentContext(ledger, session_id, **options))

    @classmethod
    def start(
        cls,
        ledger: Ledger,
        *,
        provider: str | ProviderFormat = "openai",
        policy: Policy | str = "default",
        budget: int | None = None,
        **session: Any,
    ) -> Self:
        """Start a session like ``AgentContext.start`` (a quick local write) and return its async context."""
        provider_format(provider)
        check_settings(policy, budget)
        check_tool_names(session.get("tools") or ())
        session_id = ledger.start_session(**session)
        return cls(ledger, session_id, provider=provider, policy=policy, budget=budget)

    @property
    def context(self) -> AgentContext:
        """The synchronous context underneath."""
        assert isinstance(self.sync, AgentContext)  # noqa: S101 - built so in __init__
        return self.sync

    def record_stream(self, call_id: str, stream: Any) -> AsyncRecordedStream:
        """See ``AgentContext.record_stream``: ``async for event in agent.record_stream(id, stream)``."""

        async def record(reply: dict[str, Any], latency: float) -> list[ToolCallRequest]:
            return await self.record_response(call_id, reply, latency_ms=latency)

        async def fail(error: str, arrived: StreamAssembler) -> None:
            async with self._lock:
                await asyncio.to_thread(self.context._failed, call_id, error, arrived)  # noqa: SLF001

        return AsyncRecordedStream(self.context.provider.wire_format, stream, record, fail)

    async def record_failure(self, call_id: str, error: BaseException | str) -> ModelCallFailed:
        """See ``AgentContext.record_failure``."""
        async with self._lock:
            return await asyncio.to_thread(self.context.record_failure, call_id, error)
