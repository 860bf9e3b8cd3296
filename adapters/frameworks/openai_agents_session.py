"""An OpenAI Agents SDK ``Session`` stored in the ledger: for users who want only storage."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from agents.memory import SessionABC, SessionSettings
from agents.memory.session_settings import coerce_session_settings, resolve_session_limit
from contextledger.application.kernel.ledger import Ledger
from contextledger.domain.errors import SessionExistsError
from contextledger.domain.events import AssistantMessageAdded, Recorded, ToolResultRecorded, UserMessageAdded

__all__ = ["SESSION_ITEM", "ContextLedgerSession", "generation_id"]

SESSION_ITEM = "agents_session_item"
"""Key of a ledger message's ``meta`` holding the Agents SDK item it stores, exactly as it was added."""

_MESSAGES = (UserMessageAdded, AssistantMessageAdded, ToolResultRecorded)


def generation_id(session_id: str, generation: int) -> str:
    """The ledger session holding generation ``generation`` of the SDK session ``session_id``.

    Generation 0 is the SDK's id itself; each ``pop_item`` or ``clear_session`` starts the next,
    ``<id>/<n>`` (a fork of the last one, or a new empty session), since the log is append-only.
    """
    return session_id if generation == 0 else f"{session_id}/{generation}"


class ContextLedgerSession(SessionABC):
    """A ``Session`` of the OpenAI Agents SDK whose items are stored as ledger messages.

    Each item is one ledger message (what it means to the ledger: a user message, the model's
    text, reasoning or tool call, a tool's output), the item itself kept exactly in its ``meta``
    (``SESSION_ITEM``), so ``get_items`` returns what was added, and the session can be searched,
    rendered and explained like any other. An item the ledger has no message for (a hosted tool's
    call, an output answering no pending call) is kept as an assistant message of its JSON.

    The ledger is append-only: ``pop_item`` forks the session just before its last item and
    ``clear_session`` starts an empty one, each the session's next *generation*
    (``generation_id``); reads and writes go to the newest. Nothing is ever deleted, so the history
    before a pop or a clear stays readable.

    The SDK asks a session for history once per run, so it cannot keep each model call within a
    budget; ``ContextLedgerAgents`` does that.

    Args:
        session_id: The SDK's session id.
        ledger: The ledger to store in.
        session_settings: The SDK's settings (a ``SessionSettings`` or its dict): ``limit``.
        system_prompt: The ledger session's system prompt (when it is created).
        owns_ledger: ``close`` closes the ledger.
    """

    def __init__(
        self,
        session_id: str,
        ledger: Ledger,
        *,
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
        system_prompt: str = "",
        owns_ledger: bool = False,
    ) -> None:
        self.session_id = session_id
        self.ledger = ledger
        self.session_settings = coerce_session_settings(
            dict(session_settings)
            if isinstance(session_settings, Mapping)
            else session_settings or SessionSettings()
        )
        self.system_prompt = system_prompt
        self._generation = 0
        self._lock = threading.RLock()
        self.owns_ledger = owns_ledger

    def close(self) -> None:
        """Close the ledger when this session owns it (``owns_ledger=True``)."""
        if self.owns_ledger:
            self.ledger.close()

    @property
    def ledger_session_id(self) -> str:
        """The ledger session holding the items now (the newest generation)."""
        with self._lock:
            return generation_id(self.session_id, self._current())

    # -- the Session protocol ------------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The items, oldest first; the latest ``limit`` (default: ``session_settings.limit``) only."""
        return await asyncio.to_thread(self.items, limit)

    async def add_items(self, items: list[Any]) -> None:
        """Append the items, in one transaction."""
        await asyncio.to_thread(self.add, items)

    async def pop_item(self) -> Any | None:
        """Remove and return the latest item (None when there is none)."""
        return await asyncio.to_thread(self.pop)

    async def clear_session(self) -> None:
        """Remove every item."""
        await asyncio.to_thread(self.clear)

    # -- the same, synchronous -----------------------------------------------------------------

    def items(self, limit: int | None = None) -> list[Any]:
        """See ``get_items``."""
        limit = resolve_session_limit(limit, self.session_settings)
        with self._lock:
            stored = [item for _, item in self._stored()]
        if limit is None or limit < 0:
            return stored
        return stored[-limit:] if limit else []

    def add(self, items: Sequence[Any]) -> None:
        """See ``add_items``."""
        if not items:
            return
        with self._lock:
            session = generation_id(self.session_id, self._current())
            if self.ledger.log.version(session) == 0:
                self._start(session)
            pending, issued = self._calls(session)
            messages = [_message(_plain(item), pending, issued) for item in items]
            self.ledger.append_many(session, messages)

    def pop(self) -> Any | None:
        """See ``pop_item``."""
        with self._lock:
            stored = self._stored()
            if not stored:
                return None
            position, item = stored[-1]
            current = self._current()
            self.ledger.fork(
                generation_id(self.session_id, current),
                position - 1,
                new_session_id=generation_id(self.session_id, current + 1),
            )
            self._generation = current + 1
            return item

    def clear(self) -> None:
        """See ``clear_session``."""
        with self._lock:
            current = self._current()
            if self.ledger.log.version(generation_id(self.session_id, current)) == 0:
                return
            self._start(generation_id(self.session_id, current + 1))
            self._generation = current + 1

    # -- internals -----------------------------------------------------------------------------

    def _current(self) -> int:
        """The newest generation (another instance may have started later ones)."""
        while self.ledger.log.version(generation_id(self.session_id, self._generation + 1)) > 0:
            self._generation += 1
        return self._generation

    def _start(self, session: str) -> None:
        try:
            self.ledger.start_session(session_id=session, system_prompt=self.system_prompt)
        except SessionExistsError:  # another instance started it first: it is the one to use
            return

    def _events(self) -> list[Recorded]:
        session = generation_id(self.session_id, self._current())
        if self.ledger.log.version(session) == 0:
            return []
        return self.ledger.events(session)

    def _stored(self) -> list[tuple[int, Any]]:
        """(position, item) of every stored item, oldest first."""
        return [
            (recorded.position, recorded.event.meta[SESSION_ITEM])
            for recorded in self._events()
            if isinstance(recorded.event, _MESSAGES) and SESSION_ITEM in recorded.event.meta
        ]

    def _calls(self, session: str) -> tuple[set[str], set[str]]:
        """Tool calls of the session not answered yet, and every call id it issued."""
        pending: set[str] = set()
        issued: set[str] = set()
        for recorded in self.ledger.events(session):
            event = recorded.event
            if isinstance(event, AssistantMessageAdded):
                ids = {call.id for call in event.tool_calls}
                pending |= ids
                issued |= ids
            elif isinstance(event, ToolResultRecorded):
                pending.discard(event.call_id)
        return pending, issued


def _plain(item: object) -> dict[str, Any]:
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        plain = dump(mode="json", exclude_none=True)
        if isinstance(plain, dict):
            return plain
    if not isinstance(item, Mapping):
        msg = f"a session item must be a dict, not {type(item).__name__}"
        raise TypeError(msg)
    json.dumps(item)  # raises TypeError on what JSON cannot hold, before anything is written
    return dict(item)


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [p.get("text") for p in content if isinstance(p, dict)]
        if texts and all(isinstance(t, str) for t in texts):
            return "".join(t for t in texts if isinstance(t, str))
    return json.dumps(content, ensure_ascii=False, sort_keys=True)


def _message(item: dict[str, Any], pending: set[str], issued: set[str]) -> dict[str, Any]:
    """The ledger message storing ``item`` (the item itself in its ``meta``)."""
    meta = {SESSION_ITEM: item}
    kind, role = item.get("type"), item.get("role")
    if role in {"user", "system", "developer"} and kind in {None, "message"}:
        return {"role": "user", "content": _text(item.get("content")), "meta": meta}
    if role == "assistant" and kind in {None, "message"}:
        return {"role": "assistant", "content": _text(item.get("content")) or None, "meta": meta}
    call_id = item.get("call_id")
    if kind == "function_call" and isinstance(call_id, str) and call_id not in issued:
        issued.add(call_id)
        pending.add(call_id)
        call = {"id": call_id, "name": str(item.get("name", "")), "arguments": str(item.get("arguments", ""))}
        return {"role": "assistant", "content": None, "tool_calls": [call], "meta": meta}
    if kind == "function_call_output" and call_id in pending:
        pending.discard(call_id)
        output = item.get("output")
        return {"role": "tool", "tool_call_id": call_id, "content": _text(output), "meta": meta}
    if kind == "reasoning":
        summary = [str(p.get("text", "")) for p in item.get("summary") or () if isinstance(p, dict)]
        message: dict[str, Any] = {"role": "assistant", "content": None, "reasoning": "\n\n".join(summary)}
        if isinstance(item.get("encrypted_content"), str):
            message["reasoning_signature"] = item["encrypted_content"]
        return {**message, "meta": meta}
    return {
        "role": "assistant",
        "content": json.dumps(item, ensure_ascii=False, sort_keys=True),
        "meta": meta,
    }
