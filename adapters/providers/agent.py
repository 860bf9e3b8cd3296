"""``AgentContext``: the agent-loop API for a provider named by a word (``openai``, ``anthropic``...)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from contextledger.adapters.providers.anthropic_messages import AnthropicFormat
from contextledger.adapters.providers.openai_chat import OpenAIChatFormat
from contextledger.adapters.providers.openai_responses import ResponsesFormat
from contextledger.application.agent.agent_loop import AgentLoop, AsyncAgentLoop
from contextledger.application.agent.agent_types import ProviderFormat
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.render.renderer import Renderer
from contextledger.domain.errors import ConfigError
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
        """Start a session (keyword arguments of ``Ledger.start_session``; tools in any provider's shape)."""
        return cls(ledger, ledger.start_session(**session), provider=provider, policy=policy, budget=budget)


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
        session_id = ledger.start_session(**session)
        return cls(ledger, session_id, provider=provider, policy=policy, budget=budget)
