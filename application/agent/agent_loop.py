"""The agent-loop service: render the request, record the reply, usage and tool results, thread-safely."""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import random
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from contextledger.application.agent.agent_types import (
    AgentRequest,
    ProviderFormat,
    StoredReasoning,
    ToolCallRequest,
    WirePayload,
)
from contextledger.application.agent.late_replies import check_current
from contextledger.application.agent.signed_reasoning import signed_reasoning
from contextledger.application.audit.call_recorder import CallRecorder
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.kernel.logs import get_logger
from contextledger.application.kernel.messages import (
    AssistantMessage,
    ToolResult,
    UserMessage,
    parse_messages,
)
from contextledger.application.render.renderer import Renderer
from contextledger.domain.errors import (
    BudgetError,
    ConcurrencyConflictError,
    ConfigError,
    DuplicateToolResultError,
    IdempotencyKeyReusedError,
    ValidationError,
)
from contextledger.projections.context import RenderedContext
from contextledger.projections.policy import Policy
from contextledger.projections.presets import as_policy
from contextledger.projections.reasoning_back import REASONING_RULES, RULES_KEY

__all__ = ["AgentLoop", "AsyncAgentLoop", "check_settings"]

log = get_logger(__name__)
_T = TypeVar("_T")

_BACKOFF = 0.005
_MAX_BACKOFF = 0.1
"""Seconds slept (times a random fraction) before retry ``n``: ``min(n * _BACKOFF, _MAX_BACKOFF)``."""

_FIT_ATTEMPTS = 4
"""Renders tried to fit signed reasoning (sent beyond the rendered context) within the budget."""


_KEPT_REQUESTS = 16
"""Requests whose wire-to-stored id maps are kept, to resolve the ids replies and results name."""


class _SessionLock:
    """A re-entrant lock for one (ledger, session); weakly registered so idle sessions cost nothing."""

    def __init__(self) -> None:
        self.lock = threading.RLock()


_LOCKS: weakref.WeakValueDictionary[tuple[int, str], _SessionLock] = weakref.WeakValueDictionary()
_LOCKS_GUARD = threading.Lock()


def _session_lock(ledger: Ledger, session_id: str) -> _SessionLock:
    with _LOCKS_GUARD:
        lock = _LOCKS.get((id(ledger), session_id))
        if lock is None:
            lock = _LOCKS[(id(ledger), session_id)] = _SessionLock()
        return lock


class AgentLoop:
    """The context of one session inside an agent loop, in one provider's wire format.

    ``request`` renders the context and records its ``model_calls`` audit record;
    ``record_response`` stores the model's reply as the SDK returned it and joins its usage to that
    record; ``record_tool_result`` stores a tool's output given as text or in either provider's shape.

    Concurrency: calls on the same session in one process are serialized by a lock shared by every
    loop over that (ledger, session). Writes carry idempotency keys derived from the call ids, so a
    write that loses an optimistic-concurrency race to another process (``ConcurrencyConflictError``)
    is retried as is, after a short jittered pause: the retry either appends after the other writer
    or finds its own earlier write and stores nothing.

    Args:
        ledger: The ledger holding the session (it must exist: ``Ledger.start_session``).
        session_id: The session.
        provider: The wire format (see ``contextledger.AgentContext`` for provider names).
        policy: A preset name or a ``Policy``.
        budget: Tokens a request may hold (default: the policy's).
        renderer: A renderer to share (default: one of its own).
        recorder: The call recorder to share (default: one of its own).
        retries: Attempts of a write that meets a concurrent writer.
        driver: What drives the loop, kept in each call's record (default: the class name, e.g.
            ``AgentContext``; framework adapters pass their own): ``why`` suggests its settings.
    """

    def __init__(
        self,
        ledger: Ledger,
        session_id: str,
        provider: ProviderFormat,
        *,
        policy: Policy | str = "default",
        budget: int | None = None,
        renderer: Renderer | None = None,
        recorder: CallRecorder | None = None,
        retries: int = 30,
        driver: str | None = None,
    ) -> None:
        ledger.version(session_id)  # raises SessionNotFoundError early
        self.driver = driver or type(self).__name__
        self.ledger = ledger
        self.session_id = session_id
        self.provider = provider
        self.policy = check_settings(policy, budget, retries)
        self.budget = budget
        self.renderer = renderer or Renderer(ledger)
        self.recorder = recorder or CallRecorder(ledger)
        self.retries = max(1, retries)
        self._lock = _session_lock(ledger, session_id)
        self._stored_ids: dict[str, dict[str, str]] = {}
        self._issued: dict[str, str] = {}
        """Stored tool-call id -> the model call whose reply issued it (for idempotency keys)."""
        self.conflicts = 0
        """Write attempts that lost a race to another writer and were retried (logged once per write)."""
        self._reasoning_at: dict[int, StoredReasoning | None] = {}
        """Position of an assistant message of the current turn -> its signed reasoning (None: none)."""

    # -- the loop ------------------------------------------------------------------------------

    def request(self) -> AgentRequest:
        """Render the context, record its audit record, and return the provider request arguments.

        Signed reasoning the provider needs back (Anthropic ``thinking`` blocks, Responses reasoning
        items of the current tool-use turn) is added, and the render made smaller until it fits.

        Raises:
            BudgetError: The reasoning to send back does not fit the budget.
        """
        with self._lock.lock:
            context, wire = self._fit()
            call_id = "call-" + self.ledger.ids.new_id()
            self._retry(
                lambda: self.recorder.record(
                    context,
                    self.policy,
                    payload=wire.arguments,
                    wire_format=self.provider.wire_format,
                    call_id=call_id,
                    driver=self.driver,
                    meta={RULES_KEY: REASONING_RULES},
                )
            )
            self._stored_ids[call_id] = dict(wire.stored_ids)
            while len(self._stored_ids) > _KEPT_REQUESTS:
                del self._stored_ids[next(iter(self._stored_ids))]
            return AgentRequest(call_id=call_id, arguments=wire.arguments, context=context)

    def record_response(
        self, call_id: str, response: object, *, latency_ms: float | None = None
    ) -> list[ToolCallRequest]:
        """Store the model's reply (SDK object or dict) and its usage; return the tool calls to run.

        The reply (text, reasoning with its signature, tool calls) is appended under the idempotency
        key ``reply:<call_id>`` and its usage joined to the call's audit record: recording the same
        reply again stores nothing twice.

        Raises:
            ValidationError: ``call_id`` names no recorded call of the session, or one recorded as failed
                (``record_failure``), or ``latency_ms`` is not a number of milliseconds >= 0 (nothing is
                written).
        """
        _check_latency(latency_ms)
        reply = self.provider.parse_reply(response)
        with self._lock.lock:
            view = self.recorder.call(self.session_id, call_id)
            if view.failure is not None:  # the audit would say failed, with a reply in the log
                msg = (
                    f"call {call_id!r} was recorded as failed ({view.failure.error}): its reply is not "
                    "taken; make the call again (a new request)"
                )
                raise ValidationError(msg)
            check_current(self.ledger, self.session_id, call_id, view.record.position)
            stored = self._stored_ids.get(call_id, {})
            message = dict(reply.message)
            message["tool_calls"] = [
                {**call, "id": stored.get(str(call.get("id")), call.get("id"))}
                for call in message.get("tool_calls") or ()
            ]
            if reply.usage.model and not message.get("model"):
                message["model"] = reply.usage.model
            parsed = parse_messages(message)
            self._append(parsed, f"reply:{call_id}")
            if view.usage is None:
                usage = reply.usage
                self._retry(
                    lambda: self.recorder.report_usage(
                        self.session_id,
                        call_id,
                        input_tokens=usage.input_tokens,
                        cached_tokens=usage.cached_tokens,
                        cache_write_tokens=usage.cache_write_tokens,
                        output_tokens=usage.output_tokens,
                        latency_ms=latency_ms,
                        model=usage.model,
                    )
                )
            calls = [c for m in parsed if isinstance(m, AssistantMessage) for c in m.tool_calls]
            for call in calls:
                self._issued[call.id] = call_id
            return [
                ToolCallRequest(
                    id=call.id,
                    name=call.name,
                    arguments=call.arguments if isinstance(call.arguments, str) else _json(call.arguments),
                )
                for call in calls
            ]

    def record_tool_result(
        self,
        result: str | Mapping[str, Any] | object,
        content: str | None = None,
        *,
        is_error: bool = False,
        idempotency_key: str | None = None,
    ) -> tuple[int, ...]:
        """Store a tool's output; return the positions written.

        ``result`` is a call id (the stored id, or the provider's id as the reply named it) with
        ``content``; or a whole message in either provider's shape: an OpenAI ``{"role": "tool",
        "tool_call_id", "content"}`` message, an Anthropic ``tool_result`` block or a user message of
        them, a Responses ``function_call_output`` item. The default idempotency key is derived from
        the reply that issued the call, so a retried write stores nothing twice.
        """
        if isinstance(result, str):
            text = (
                "" if content is None else content
            )  # 0, False, [] are refused as non-text, not stored as ""
            messages: list[Any] = [ToolResult(call_id=result, content=text, is_error=is_error)]
        elif isinstance(result, Mapping) and result.get("type") == "tool_result":
            messages = parse_messages({"role": "user", "content": [dict(result)]})
        else:
            messages = parse_messages(result)
        with self._lock.lock:
            resolved = [self._resolve(m) for m in messages]
            key = idempotency_key or self._result_key(resolved)
            try:
                return self._append(resolved, key)
            except IdempotencyKeyReusedError:
                if idempotency_key is not None:
                    raise
                # the key derived from the call's reply stored another result: the call has one already
                first = next(m.call_id for m in resolved if isinstance(m, ToolResult))
                raise DuplicateToolResultError(self.session_id, first) from None

    def add_user_message(
        self, message: str | Mapping[str, Any] | object, *, idempotency_key: str | None = None
    ) -> tuple[int, ...]:
        """Store what the user said: text, or a user message in either provider's shape."""
        parsed = [UserMessage(content=message)] if isinstance(message, str) else parse_messages(message)
        with self._lock.lock:
            return self._append([self._resolve(m) for m in parsed], idempotency_key)

    # -- internals -----------------------------------------------------------------------------

    def _fit(self) -> tuple[RenderedContext, WirePayload]:
        budget = self.budget
        limit: int | None = None  # the first render's prompt limit: context plus reasoning stay within it
        for _ in range(_FIT_ATTEMPTS):
            context = self.renderer.render(self.session_id, self.policy, budget=budget)
            limit = context.budget if limit is None else limit
            wire = self.provider.payload(context, self._reasoning(context))
            extra = sum(self.renderer.counter.count(text) for text in wire.extra_texts)
            if context.tokens + extra <= limit:
                return context, wire
            budget = limit - extra
            if budget <= 0:
                break
        msg = f"session {self.session_id!r}: the signed reasoning to send back does not fit the budget"
        raise BudgetError(msg)

    def _reasoning(self, context: RenderedContext) -> dict[int, StoredReasoning]:
        """Signed reasoning of the assistant messages with tool calls after the last user message."""
        return signed_reasoning(self.ledger, self.session_id, context, self._reasoning_at)

    def _resolve(self, message: Any) -> Any:
        """A tool result naming a provider's id gets the stored id of the latest request that sent it."""
        if not isinstance(message, ToolResult) or message.call_id in self._issued:
            return message
        for stored in reversed(self._stored_ids.values()):
            if message.call_id in stored:
                return message.model_copy(update={"call_id": stored[message.call_id]})
        return message

    def _result_key(self, messages: Sequence[Any]) -> str | None:
        ids = [m.call_id for m in messages if isinstance(m, ToolResult)]
        if not ids or len(ids) != len(messages) or any(i not in self._issued for i in ids):
            return None
        joined = "|".join(f"{self._issued[i]}:{i}" for i in ids)
        return "tool:" + hashlib.sha256(joined.encode("utf-8", "surrogatepass")).hexdigest()

    def _append(self, messages: Sequence[Any], key: str | None) -> tuple[int, ...]:
        return self._retry(
            lambda: self.ledger.append_many(self.session_id, list(messages), idempotency_key=key)
        )

    def _retry(self, write: Callable[[], _T]) -> _T:
        """Run ``write``; when another writer appended first, run it again (at most ``retries`` times).

        A write that lost the race stored nothing, so running it again is safe; an appended write
        carries an idempotency key, so one whose success went unseen is found, not repeated.
        """
        for attempt in range(1, self.retries):
            try:
                result = write()
            except ConcurrencyConflictError:
                time.sleep(min(_BACKOFF * attempt, _MAX_BACKOFF) * random.random())  # noqa: S311 - jitter
                continue
            if attempt > 1:  # one line per write that met other writers, not one per attempt
                self.conflicts += attempt - 1
                log.debug("agent_loop.retried", session_id=self.session_id, conflicts=attempt - 1)
            return result
        self.conflicts += self.retries - 1
        log.info("agent_loop.last_attempt", session_id=self.session_id, conflicts=self.retries - 1)
        return write()


def check_settings(policy: object, budget: object, retries: object = 30) -> Policy:
    """Return the loop's policy, its budget and retries checked: before a session is started for it.

    Raises:
        ConfigError: an unknown preset, a policy that is neither a name nor a ``Policy``, a budget that is
            not a whole number of tokens the window can hold, or retries that are not a whole number.
    """
    chosen = as_policy(policy)
    if budget is not None:
        chosen.budget.build().with_prompt_limit(budget)  # type: ignore[arg-type]  # it checks the type
    if isinstance(retries, bool) or not isinstance(retries, int):
        msg = f"retries must be a whole number of attempts, not {retries!r}"
        raise ConfigError(msg)
    return chosen


def _check_latency(latency_ms: object) -> None:
    """Refuse a latency that is not a finite number of milliseconds >= 0 (before the reply is written)."""
    if latency_ms is None:
        return
    if (
        isinstance(latency_ms, bool)
        or not isinstance(latency_ms, int | float)
        or not math.isfinite(latency_ms)
        or latency_ms < 0
    ):
        msg = f"latency_ms takes a number of milliseconds >= 0, not {latency_ms!r}; nothing was written"
        raise ValidationError(msg)


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class AsyncAgentLoop:
    """The asyncio face of ``AgentLoop``: each call runs in a worker thread, one at a time per loop."""

    def __init__(self, loop: AgentLoop) -> None:
        self.sync = loop
        self._lock = asyncio.Lock()

    @property
    def session_id(self) -> str:
        """The session."""
        return self.sync.session_id

    async def request(self) -> AgentRequest:
        """See ``AgentLoop.request``."""
        async with self._lock:
            return await asyncio.to_thread(self.sync.request)

    async def record_response(
        self, call_id: str, response: object, *, latency_ms: float | None = None
    ) -> list[ToolCallRequest]:
        """See ``AgentLoop.record_response``."""
        async with self._lock:
            return await asyncio.to_thread(
                self.sync.record_response, call_id, response, latency_ms=latency_ms
            )

    async def record_tool_result(
        self,
        result: str | Mapping[str, Any] | object,
        content: str | None = None,
        *,
        is_error: bool = False,
        idempotency_key: str | None = None,
    ) -> tuple[int, ...]:
        """See ``AgentLoop.record_tool_result``."""
        async with self._lock:
            return await asyncio.to_thread(
                self.sync.record_tool_result,
                result,
                content,
                is_error=is_error,
                idempotency_key=idempotency_key,
            )

    async def add_user_message(
        self, message: str | Mapping[str, Any] | object, *, idempotency_key: str | None = None
    ) -> tuple[int, ...]:
        """See ``AgentLoop.add_user_message``."""
        async with self._lock:
            return await asyncio.to_thread(
                self.sync.add_user_message, message, idempotency_key=idempotency_key
            )
