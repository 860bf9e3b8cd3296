"""The OpenAI Agents SDK: each model call of a run shown the rendered context; replies and usage recorded."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Self

from agents import Agent, ModelResponse, RunConfig, RunContextWrapper, RunHooks
from agents.run_config import CallModelData, ModelInputData
from contextledger.adapters.frameworks.openai_agents_wires import (
    ITEM_KEYS,
    is_model_item,
    item_key,
    model_input,
    provider_of,
    reply_of,
    tool_output_text,
)
from contextledger.adapters.frameworks.reply_meta import ReplyMeta
from contextledger.adapters.providers.agent import provider_format
from contextledger.adapters.providers.openai_responses import ResponsesFormat
from contextledger.application.agent.agent_loop import AgentLoop
from contextledger.application.agent.agent_types import ProviderFormat
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.render.renderer import Renderer
from contextledger.domain.events import AssistantMessageAdded, ToolResultRecorded, UserMessageAdded
from contextledger.projections.policy import Policy

__all__ = ["ContextLedgerAgents"]


class ContextLedgerAgents:
    """The context layer of OpenAI Agents SDK runs: ``Runner.run(agent, input, **ctx.run_options())``.

    The SDK asks a ``Session`` for history once per run; this adapter sits on the seams that see
    every model call instead. Its ``call_model_input_filter`` (``RunConfig``) appends the run's new
    items to the ledger (what the user said, tool outputs; each once) and replaces the model input
    with the session's rendered, token-budgeted context, recording the call's audit record in the
    wire of the agent's model (OpenAI Responses, encrypted reasoning items of the current tool-use
    turn sent back; Chat Completions for ``OpenAIChatCompletionsModel``). Its run hooks'
    ``on_llm_end`` records the model's reply (text, reasoning with its ``encrypted_content``,
    calls) and joins its usage and latency to that record.

    An item is known by its provider id (calls, outputs, reasoning and message items) or the hash of
    its JSON (what the user said); the keys are kept in the ledger messages' ``meta``, so handing a
    run its whole history (``result.to_input_list() + [new]``), or only the new input (the ledger
    is the memory), writes nothing twice. The tools the model is sent are the agent's (the SDK
    sends them); give the session the same ones (``start(agent=...)`` does) so they are counted.

    Example::

        ctx = ContextLedgerAgents.start(ledger, agent=agent, budget=8000)
        result = await Runner.run(agent, "task", **ctx.run_options())

    Args:
        ledger: The ledger holding the session.
        session_id: The session (``start`` begins one).
        policy: A preset name or a ``Policy``.
        budget: Tokens a model call may hold (default: the policy's).
        renderer: A renderer to share.
        provider: The wire (``openai-responses`` or ``openai``); default: the agent's model's own.
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
        self._format = ReplyMeta(self.provider or ResponsesFormat())
        self.loop = AgentLoop(
            ledger, session_id, self._format, policy=policy, budget=budget, renderer=renderer
        )
        self.hooks = _LedgerHooks(self)
        """The run hooks recording each reply: pass as ``Runner.run(..., hooks=ctx.hooks)``."""
        self._lock = threading.RLock()
        self._known: list[str] | None = None
        self._pending: tuple[str, float] | None = None
        """The call id rendered last and when, whose reply is not recorded yet."""

    @classmethod
    def start(
        cls,
        ledger: Ledger,
        *,
        agent: Agent[Any] | None = None,
        tools: Iterable[Any] = (),
        policy: Policy | str = "default",
        budget: int | None = None,
        provider: str | ProviderFormat | None = None,
        **session: Any,
    ) -> Self:
        """Start a session (``Ledger.start_session`` options) and return its adapter.

        ``agent`` gives the session its instructions (when they are text) and function tools;
        ``tools`` adds function tools (``FunctionTool``) or schemas: they are counted in the budget
        like the model will see them.
        """
        schemas = [_schema(tool) for tool in [*(agent.tools if agent else ()), *tools]]
        if agent is not None and isinstance(agent.instructions, str):
            session.setdefault("system_prompt", agent.instructions)
        session_id = ledger.start_session(tools=[s for s in schemas if s is not None], **session)
        return cls(ledger, session_id, policy=policy, budget=budget, provider=provider)

    @property
    def session_id(self) -> str:
        """The ledger session."""
        return self.loop.session_id

    def run_options(self, **run_config: Any) -> dict[str, Any]:
        """``Runner.run`` keyword arguments: ``run_config`` (with the input filter) and ``hooks``."""
        return {"run_config": self.run_config(**run_config), "hooks": self.hooks}

    def run_config(self, **options: Any) -> RunConfig:
        """A ``RunConfig`` (``options`` passed on) whose ``call_model_input_filter`` is this adapter's."""
        return RunConfig(call_model_input_filter=self.filter, **options)

    # -- the seams -----------------------------------------------------------------------------

    async def filter(self, data: CallModelData[Any]) -> ModelInputData:
        """``call_model_input_filter``: record the new input items; return the rendered context."""
        items = [_plain(item) for item in data.model_data.input]
        model = data.agent.model
        return await asyncio.to_thread(self.model_input, items, model)

    def model_input(self, items: Sequence[Mapping[str, Any]], model: object = None) -> ModelInputData:
        """Record the items not yet in the ledger; render; return the model input to send instead."""
        with self._lock:
            self.record_items(items)
            self._format.inner = self.provider or provider_of(model)
            request = self.loop.request()
            self._pending = (request.call_id, time.perf_counter())
            new_input, instructions = model_input(self._format.wire_format, request.arguments)
            return ModelInputData(input=new_input, instructions=instructions)  # type: ignore[arg-type]

    def record_reply(self, response: ModelResponse, model: object = None) -> None:
        """Record the model's reply to the call rendered last, with its usage and latency."""
        with self._lock:
            if self._pending is None:
                return
            (call_id, started), self._pending = self._pending, None
            latency = (time.perf_counter() - started) * 1000
            items = [_plain(item) for item in response.output]
            keys = [item_key(item) for item in items]
            self._format.meta = {ITEM_KEYS: keys}
            name = model if isinstance(model, str) else getattr(model, "model", None)
            reply = reply_of(self._format.wire_format, response.output, response.usage, _name(name))
            self.loop.record_response(call_id, reply, latency_ms=latency)
            self._known_keys().extend(keys)

    def record_items(self, items: Sequence[Mapping[str, Any]]) -> int:
        """Append the items the ledger has not seen (aligned on its history's tail); return how many.

        Only the items the ledger records take part: what the user said, tool outputs and the
        model's items. System and developer messages (the session's system prompt is given at its
        start) and items of other types are left out, the same way in every run.
        """
        items = [item for item in items if is_model_item(item) or _kept(item)]
        with self._lock:
            known = self._known_keys()
            keys = [item_key(item) for item in items]
            start = _overlap(known, keys)
            group: list[Mapping[str, Any]] = []
            for item, key in zip(items[start:], keys[start:], strict=True):
                if is_model_item(item):
                    group.append(item)
                    continue
                self._flush(group)
                group = []
                self._append_item(item, key, len(known))
                known.append(key)
            self._flush(group)
            return len(items) - start

    # -- internals -----------------------------------------------------------------------------

    def _append_item(self, item: Mapping[str, Any], key: str, index: int) -> None:
        meta = {ITEM_KEYS: [key]}
        idempotency_key = f"agents:{index}:{key}"
        if item.get("type") == "function_call_output":
            result = {
                "role": "tool",
                "tool_call_id": item["call_id"],
                "content": tool_output_text(item.get("output")),
            }
            self.loop.record_tool_result({**result, "meta": meta}, idempotency_key=idempotency_key)
        else:
            content = item.get("content")
            self.loop.add_user_message(
                {"role": "user", "content": content, "meta": meta}, idempotency_key=idempotency_key
            )

    def _flush(self, group: Sequence[Mapping[str, Any]]) -> None:
        """Append model items that no recorded reply holds (history made elsewhere) as one message."""
        if not group:
            return
        known = self._known_keys()
        keys = [item_key(item) for item in group]
        parsed = ResponsesFormat().parse_reply({"output": [dict(item) for item in group]}).message
        message = {**parsed, "meta": {**(parsed.get("meta") or {}), ITEM_KEYS: keys}}
        self.loop.ledger.append_many(
            self.session_id, [message], idempotency_key=f"agents:{len(known)}:{keys[0]}"
        )
        known.extend(keys)

    def _known_keys(self) -> list[str]:
        """Keys of the SDK items the session records, in order (read from the ledger once)."""
        if self._known is None:
            known: list[str] = []
            for recorded in self.loop.ledger.events(self.session_id):
                event = recorded.event
                if isinstance(event, UserMessageAdded | AssistantMessageAdded | ToolResultRecorded):
                    keys = event.meta.get(ITEM_KEYS)
                    if isinstance(keys, list):
                        known.extend(str(k) for k in keys)
            self._known = known
        return self._known


def _kept(item: Mapping[str, Any]) -> bool:
    """Whether the ledger records an item that is not the model's: a user message or a tool output."""
    return item.get("type") == "function_call_output" or (
        item.get("role") == "user" and item.get("type") in {None, "message"}
    )


def _overlap(known: Sequence[str], keys: Sequence[str]) -> int:
    """How many leading ``keys`` are the tail of ``known`` (all of it when the history is handed back)."""
    if not keys:
        return 0
    n = len(known)
    for j in range(min(n, len(keys)), 0, -1):
        if known[n - j] == keys[0] and list(known[n - j :]) == list(keys[:j]):
            return j
    return 0


def _plain(item: object) -> dict[str, Any]:
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        plain = dump(mode="json", exclude_none=True)
        return plain if isinstance(plain, dict) else {}
    return dict(item) if isinstance(item, Mapping) else {}


def _name(model: object) -> str | None:
    return model if isinstance(model, str) and model else None


def _schema(tool: object) -> dict[str, Any] | None:
    """A function tool's schema as the ledger keeps it; None for hosted tools (the SDK sends those)."""
    if isinstance(tool, Mapping):
        return dict(tool)
    parameters = getattr(tool, "params_json_schema", None)
    if not isinstance(parameters, dict):
        return None
    description = getattr(tool, "description", "") or ""
    schema: dict[str, Any] = {
        "name": getattr(tool, "name", ""),
        "description": description,
        "parameters": parameters,
    }
    strict = getattr(tool, "strict_json_schema", None)  # what the SDK sends as the tool's ``strict``
    if isinstance(strict, bool):
        schema["strict"] = strict
    return schema


class _LedgerHooks(RunHooks[Any]):
    """Run hooks recording each model reply of the run (``on_llm_end``)."""

    def __init__(self, adapter: ContextLedgerAgents) -> None:
        self.adapter = adapter

    async def on_llm_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse
    ) -> None:
        """Record the reply and its usage."""
        del context
        await asyncio.to_thread(self.adapter.record_reply, response, agent.model)
