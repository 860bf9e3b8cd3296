"""A tool's ``strict`` flag is kept and sent again exactly where each wire carried it."""

from __future__ import annotations

from typing import Any

import contextledger
import msgspec
import pytest
from contextledger.application.audit.call_recorder import payload_sha
from contextledger.domain.events import SessionStarted, ToolSchema

PARAMETERS = {
    "type": "object",
    "properties": {"path": {"type": "string"}},
    "required": ["path"],
    "additionalProperties": False,
}
TOOLS: dict[str, list[dict[str, Any]]] = {
    "openai": [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file.",
                "parameters": PARAMETERS,
                "strict": True,
            },
        },
        {"type": "function", "function": {"name": "run", "description": "Run.", "parameters": PARAMETERS}},
    ],
    "openai-responses": [
        {
            "type": "function",
            "name": "read_file",
            "description": "Read a file.",
            "parameters": PARAMETERS,
            "strict": True,
        },
        {"type": "function", "name": "run", "description": "Run.", "parameters": PARAMETERS, "strict": False},
    ],
    "anthropic": [
        {"name": "read_file", "description": "Read a file.", "input_schema": PARAMETERS, "strict": True},
        {"name": "run", "description": "Run.", "input_schema": PARAMETERS},
    ],
}


def _given(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tools without the cache breakpoint AgentContext puts on Anthropic's last tool (not given)."""
    return [{k: v for k, v in tool.items() if k != "cache_control"} for tool in tools]


@pytest.mark.parametrize("provider", ["openai", "openai-responses", "anthropic"])
def test_strict_tools_round_trip_byte_exact_through_agent_context_and_replay_call(provider, tmp_path):
    """Tools given in a wire's shape, ``strict`` set on some, are sent and replayed exactly as given.

    The request's tools equal the caller's (the flag where the wire carries it, absent where the
    caller left it out), and ``replay_call`` rebuilds the same payload with the recorded hash.
    """
    with contextledger.open_ledger(f"sqlite:///{tmp_path / 'l.db'}") as ledger:
        agent = contextledger.AgentContext.start(
            ledger, provider=provider, budget=8_000, tools=TOOLS[provider]
        )
        agent.add_user_message("read a.txt")
        request = agent.request()
        assert _given(request.arguments["tools"]) == TOOLS[provider]
        replayed = contextledger.replay_call(ledger, request.call_id, agent.session_id)
        assert replayed.payload["tools"] == request.arguments["tools"]
        sent = {k: v for k, v in request.arguments.items() if k in replayed.payload}
        assert replayed.payload == sent
        view = next(v for v in contextledger.CallRecorder(ledger).calls(agent.session_id))
        assert replayed.payload_sha == view.record.payload_sha == payload_sha(sent)


def test_a_tool_without_strict_encodes_as_before(tmp_path):
    """A tool that carried no flag stores no ``strict`` key: earlier events and hashes are unchanged."""
    assert msgspec.json.encode(ToolSchema(name="run")) == b'{"name":"run","description":"","parameters":{}}'
    assert b'"strict":true' in msgspec.json.encode(ToolSchema(name="run", strict=True))
    with contextledger.open_ledger(f"sqlite:///{tmp_path / 'l.db'}") as ledger:
        session = ledger.start_session(tools=TOOLS["openai"])
        started = ledger.events(session)[0].event
        assert isinstance(started, SessionStarted)
        assert [t.strict for t in started.tools] == [True, msgspec.UNSET]
