"""Peer context policies replayed on plain OpenAI messages, independent of contextledger.

Every peer gets, before each model call, the system message and the history of OpenAI messages
logged before that call, and returns the messages it would send. A "turn" is one model call: an
assistant message with the tool results that answer it; a user message is a unit of its own. The
window peers pin the system prompt and the history up to the first user message (the task) and cut
only whole units, so they never split a call from its results.

- ``unmanaged``: everything.
- ``trim_messages``: the real ``langchain_core.messages.trim_messages``, strategy ``"last"``,
  ``include_system=True``, ``start_on="human"`` (LangChain's documented chat-history setting),
  ``allow_partial=False``, before every call, counted with the bench's own counter.
- ``trim_messages_nostart``: the same without ``start_on`` (it may keep orphan tool results).
- ``masking``: tool outputs older than the last 10 turns replaced by a placeholder (JetBrains'
  observation masking), then the oldest units dropped while over budget.
- ``window_per_turn``: the oldest units dropped on every call until the request fits.
- ``chunked_window``: when the request goes over budget, drop the oldest units down to 50% of it,
  then keep appending until over again (hysteresis).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from wire import WireCounter

__all__ = ["MASK_PLACEHOLDER", "PEERS", "Peer", "make_peers"]

MASK_PLACEHOLDER = "[Old tool result content cleared]"
MASK_KEEP_TURNS = 10
CHUNK_LOW_WATER = 0.5

Message = dict[str, Any]


def _units(history: list[Message]) -> tuple[int, list[int]]:
    """Return the end of the pinned head (through the first user message) and the unit starts after it."""
    head = 0
    for index, message in enumerate(history):
        if message["role"] == "user":
            head = index + 1
            break
    while head < len(history) and history[head]["role"] == "tool":
        head += 1  # results of a call made before the task stay with their call
    starts = [i for i in range(head, len(history)) if history[i]["role"] != "tool"]
    return head, starts


class Peer:
    """A policy that picks the messages to send before each call of one session."""

    name = "peer"

    def __init__(self, counter: WireCounter, budget: int) -> None:
        """Keep the counter and the request budget (tokens, tools included)."""
        self.counter = counter
        self.budget = budget

    def reset(self) -> None:
        """Forget per-session state before a new session."""

    def prompt(self, system: list[Message], history: list[Message], tools_tokens: int) -> list[Message]:
        """Return the messages to send (system first) given the history before the call."""
        raise NotImplementedError

    # -- helpers for the window peers --------------------------------------------------------

    def _sizes(self, messages: list[Message]) -> list[int]:
        return [self.counter.message_size(m) for m in messages]

    def _cut_to(
        self, system: list[Message], history: list[Message], limit: float, tools: int, first: int = 0
    ) -> tuple[list[Message], int]:
        """Drop the oldest whole units (from unit ``first`` on) until the request is within ``limit``."""
        head, starts = _units(history)
        sizes = self._sizes(history)
        fixed = tools + sum(self._sizes(system)) + sum(sizes[:head])
        if not starts:
            return [*system, *history], 0
        suffix = [0] * (len(starts) + 1)
        for u in range(len(starts) - 1, -1, -1):
            end = starts[u + 1] if u + 1 < len(starts) else len(history)
            suffix[u] = suffix[u + 1] + sum(sizes[starts[u] : end])
        cut = min(first, len(starts) - 1)
        while cut < len(starts) - 1 and fixed + suffix[cut] > limit:
            cut += 1
        return [*system, *history[:head], *history[starts[cut] :]], cut


class Unmanaged(Peer):
    """Send everything."""

    name = "unmanaged"

    def prompt(self, system: list[Message], history: list[Message], tools_tokens: int) -> list[Message]:
        """Return the whole history."""
        del tools_tokens
        return [*system, *history]


class WindowPerTurn(Peer):
    """Drop the oldest units on every call until the request fits."""

    name = "window_per_turn"

    def prompt(self, system: list[Message], history: list[Message], tools_tokens: int) -> list[Message]:
        """Return the newest units that fit after the pinned head."""
        return self._cut_to(system, history, self.budget, tools_tokens)[0]


class ChunkedWindow(Peer):
    """Cut down to 50% of the budget when over it, then append until over again."""

    name = "chunked_window"

    def reset(self) -> None:
        """Start a session with nothing cut."""
        self._cut = 0

    def prompt(self, system: list[Message], history: list[Message], tools_tokens: int) -> list[Message]:
        """Keep the current cut while the request fits; otherwise move it to reach the low-water mark."""
        kept, cut = self._cut_to(system, history, float("inf"), tools_tokens, first=self._cut)
        if tools_tokens + sum(self._sizes(kept)) > self.budget:
            kept, cut = self._cut_to(
                system, history, self.budget * CHUNK_LOW_WATER, tools_tokens, first=self._cut
            )
        self._cut = cut
        return kept


class Masking(Peer):
    """Replace tool outputs older than the last 10 turns by a placeholder, then window if needed."""

    name = "masking"

    def prompt(self, system: list[Message], history: list[Message], tools_tokens: int) -> list[Message]:
        """Mask old observations, then drop the oldest units while over budget."""
        turns = [i for i, m in enumerate(history) if m["role"] == "assistant"]
        boundary = turns[-MASK_KEEP_TURNS] if len(turns) >= MASK_KEEP_TURNS else 0
        masked = [
            {**m, "content": MASK_PLACEHOLDER} if m["role"] == "tool" and i < boundary else m
            for i, m in enumerate(history)
        ]
        return self._cut_to(system, masked, self.budget, tools_tokens)[0]


class TrimMessages(Peer):
    """LangChain's ``trim_messages`` (strategy "last") before every call, with the bench's counter."""

    name = "trim_messages"
    start_on: str | None = "human"

    def reset(self) -> None:
        """Drop the per-session message conversions."""
        self._lc: list[Any] = []
        self._system: list[Any] = []
        self._sizes_by_id: dict[int, int] = {}
        self._dicts_by_id: dict[int, Message] = {}

    def _convert(self, message: Message) -> Any:
        from langchain_core.messages import (  # noqa: PLC0415
            AIMessage,
            HumanMessage,
            SystemMessage,
            ToolMessage,
        )

        role, content = message["role"], message.get("content") or ""
        converted: Any
        if role == "system":
            converted = SystemMessage(content)
        elif role == "user":
            converted = HumanMessage(content)
        elif role == "tool":
            converted = ToolMessage(content, tool_call_id=message["tool_call_id"])
        else:
            calls = []
            for call in message.get("tool_calls") or ():
                try:
                    args = json.loads(call["function"]["arguments"] or "{}")
                except ValueError:
                    args = {}
                calls.append(
                    {
                        "name": call["function"]["name"],
                        "args": args if isinstance(args, dict) else {},
                        "id": call["id"],
                    }
                )
            converted = AIMessage(content, tool_calls=calls)
        self._sizes_by_id[id(converted)] = self.counter.message_size(message)
        self._dicts_by_id[id(converted)] = message
        return converted

    def _count(self, messages: list[Any]) -> int:
        return sum(self._sizes_by_id[id(m)] for m in messages)

    def prompt(self, system: list[Message], history: list[Message], tools_tokens: int) -> list[Message]:
        """Convert new messages once, trim the whole list, map the kept messages back."""
        from langchain_core.messages import trim_messages  # noqa: PLC0415

        if not self._system and system:
            self._system = [self._convert(m) for m in system]
        while len(self._lc) < len(history):
            self._lc.append(self._convert(history[len(self._lc)]))
        kept = trim_messages(
            [*self._system, *self._lc[: len(history)]],
            max_tokens=max(0, self.budget - tools_tokens),
            token_counter=self._count,
            strategy="last",
            include_system=True,
            start_on=self.start_on,
            allow_partial=False,
        )
        return [self._dicts_by_id[id(m)] for m in kept]


class TrimMessagesNoStart(TrimMessages):
    """``trim_messages`` without ``start_on``: nothing stops it from starting on a tool result."""

    name = "trim_messages_nostart"
    start_on = None


PEERS: tuple[type[Peer], ...] = (
    Unmanaged,
    TrimMessages,
    TrimMessagesNoStart,
    Masking,
    WindowPerTurn,
    ChunkedWindow,
)


def make_peers(counter: WireCounter, budget: int) -> list[Peer]:
    """Return a fresh instance of every peer for one budget."""
    peers: list[Peer] = []
    for kind in PEERS:
        factory: Callable[[WireCounter, int], Peer] = kind
        peer = factory(counter, budget)
        peer.reset()
        peers.append(peer)
    return peers
