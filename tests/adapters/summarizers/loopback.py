"""A scripted HTTP server on 127.0.0.1 that answers like a model API and records what it received."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted answer: status, JSON (or raw text) body, headers, and a delay before answering."""

    status: int = 200
    body: Any = None
    raw: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    drip: float = 0.0
    """Seconds between the body's bytes, sent one at a time (a server that never stops answering)."""


@dataclass
class Received:
    """One request as the server saw it."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class Script:
    """Replies served in order (the last one repeats) and the requests received."""

    replies: list[Reply]
    received: list[Received] = field(default_factory=list)
    refuse: Callable[[dict[str, Any]], str | None] | None = None
    """Says why a body is refused (as the real APIs refuse one over the model's window), or None."""


def _handler(script: Script) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: object) -> None:  # keep test output clean
            return

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            script.received.append(Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            index = min(len(script.received), len(script.replies)) - 1
            reply = script.replies[index]
            why = script.refuse(body) if script.refuse is not None else None
            if why is not None:  # the shape of OpenAI's refusal of a request over the context window
                error = {"message": why, "type": "invalid_request_error", "code": "context_length_exceeded"}
                reply = Reply(status=400, body={"error": error})
            if reply.delay:
                time.sleep(reply.delay)
            payload = (reply.raw if reply.raw is not None else json.dumps(reply.body)).encode()
            try:
                self.send_response(reply.status)
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                if not reply.drip:
                    self.wfile.write(payload)
                for byte in payload if reply.drip else b"":
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(reply.drip)
            except (BrokenPipeError, ConnectionResetError):
                return  # the client gave up (timeout test)

    return Handler


@contextmanager
def serve(
    *replies: Reply, refuse: Callable[[dict[str, Any]], str | None] | None = None
) -> Iterator[tuple[str, Script]]:
    """Serve ``replies`` on a free loopback port; yield the base URL and the script.

    ``refuse`` (a body's reason to be refused, or None) answers 400 ``context_length_exceeded`` instead.
    """
    script = Script(list(replies), refuse=refuse)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(script))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", script
    finally:
        server.shutdown()
        server.server_close()
