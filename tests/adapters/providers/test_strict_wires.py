"""AgentContext on each wire (sync, async, streamed) through the strict server; each call replays exactly."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anthropic
import contextledger
import httpx
import openai
import pytest
from contextledger.application.audit.call_recorder import payload_sha

sys.path.insert(0, str(Path(__file__).parent))
from strict_server import StrictServer, Turn, strict_server

BUDGET = 3_000
TOOLS = [
    {"name": "read_file", "description": "Read a file.", "parameters": {"type": "object", "properties": {}}},
    {"name": "run", "description": "Run a command.", "parameters": {"type": "object", "properties": {}}},
]
SCRIPT = [
    Turn(thinking="Read the big file first.", calls=(("read_file", {"path": "big.txt"}),)),
    Turn(thinking="Now two commands.", calls=(("run", {"command": "ls"}), ("run", {"command": "pwd"}))),
    Turn(text="One more look.", calls=(("read_file", {"path": "small.txt"}),)),
    Turn(text="Done with the first task."),
    Turn(thinking="A second task: a command.", calls=(("run", {"command": "date"}),)),
    Turn(text="All done."),
]
"""Two user tasks: thinking with tool calls, parallel calls, text with a call, answers."""

BIG = "".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(400))
OUTPUTS = {"read_file": BIG, "run": "exit code 0\nok"}
KEYS = {
    "openai": ("messages", "tools"),
    "openai-responses": ("instructions", "input", "tools"),
    "anthropic": ("system", "messages", "tools"),
}
"""The request keys the ledger renders, per wire (the rest are the caller's: model, max_tokens...)."""


def client_for(provider: str, url: str) -> Any:
    """The SDK client of ``provider`` on the server (a context manager: closed after the session)."""
    if provider == "anthropic":
        return anthropic.Anthropic(base_url=url, api_key="x")
    return openai.OpenAI(base_url=f"{url}/v1", api_key="x")


def send(client: Any, provider: str, arguments: dict[str, Any]) -> Any:
    """One plain SDK call on ``provider``'s wire."""
    if provider == "openai":
        return client.chat.completions.create(model="m", **arguments)
    if provider == "openai-responses":
        return client.responses.create(
            model="m", store=False, include=["reasoning.encrypted_content"], **arguments
        )
    return client.messages.create(
        model="m", max_tokens=2048, thinking={"type": "enabled", "budget_tokens": 1024}, **arguments
    )


def run_tasks(agent: Any, call: Any, *, streamed: bool = False) -> None:
    """Two tasks, each a tool loop until the model answers: ``call(request) -> reply or stream``."""
    for task in ("inspect the files", "and the date?"):
        agent.add_user_message(task)
        for _ in range(6):
            request = agent.request()
            if streamed:
                recorded = agent.record_stream(request.call_id, call(request))
                assert list(recorded)  # the events come through
                calls = recorded.tool_calls
            else:
                calls = agent.record_response(request.call_id, call(request))
            if not calls:
                break
            for tool in calls:
                agent.record_tool_result(tool.id, OUTPUTS[tool.name])


def check_session(ledger: contextledger.Ledger, server: StrictServer, session: str, provider: str) -> None:
    """Every request accepted within budget (the server's count); every call replays byte for byte."""
    assert [e.problems for e in server.exchanges] == [[]] * len(server.exchanges)
    assert len(server.exchanges) == len(SCRIPT)
    assert max(e.tokens for e in server.exchanges) <= BUDGET
    views = contextledger.CallRecorder(ledger).calls(session)
    assert len(views) == len(server.exchanges)
    for view, exchange in zip(views, server.exchanges, strict=True):
        sent = {k: exchange.body[k] for k in KEYS[provider] if k in exchange.body}
        replayed = contextledger.replay_call(ledger, view.record.call_id, session)
        assert replayed.payload == sent
        assert replayed.payload_sha == view.record.payload_sha == payload_sha(sent)
        assert view.usage is not None
        assert view.usage.input_tokens == exchange.tokens


@pytest.mark.parametrize("provider", ["openai", "openai-responses", "anthropic"])
def test_agent_context_sync_on_each_wire_is_accepted_within_budget_and_replays(provider, tmp_path):
    """Sync SDK calls: thinking/reasoning sent back by each wire's rules; nothing refused; replay exact."""
    with (
        strict_server(SCRIPT, budget=BUDGET) as server,
        contextledger.open_ledger(f"sqlite:///{tmp_path / 'l.db'}") as ledger,
        client_for(provider, server.url) as client,
    ):
        agent = contextledger.AgentContext.start(
            ledger, provider=provider, budget=BUDGET, system_prompt="be brief", tools=TOOLS
        )
        run_tasks(agent, lambda request: send(client, provider, request.arguments))
        check_session(ledger, server, agent.session_id, provider)
    if provider == "anthropic":
        assert server.thinking  # thinking was issued with calls, and sent back (else refused)
    if provider == "openai-responses":
        assert server.reasoning


async def _async_send(client: Any, provider: str, arguments: dict[str, Any]) -> Any:
    if provider == "openai":
        return await client.chat.completions.create(model="m", **arguments)
    if provider == "openai-responses":
        return await client.responses.create(
            model="m", store=False, include=["reasoning.encrypted_content"], **arguments
        )
    return await client.messages.create(
        model="m", max_tokens=2048, thinking={"type": "enabled", "budget_tokens": 1024}, **arguments
    )


def _async_client(provider: str, url: str) -> Any:
    if provider == "anthropic":
        return anthropic.AsyncAnthropic(base_url=url, api_key="x")
    return openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="x")


@pytest.mark.parametrize("provider", ["openai", "openai-responses", "anthropic"])
def test_agent_context_async_on_each_wire_is_accepted_within_budget_and_replays(provider, tmp_path):
    """AsyncAgentContext with the SDKs' async clients: the same session shape, accepted and replayed."""

    async def main(ledger: contextledger.Ledger, url: str) -> str:
        agent = contextledger.AsyncAgentContext.start(
            ledger, provider=provider, budget=BUDGET, system_prompt="be brief", tools=TOOLS
        )
        async with _async_client(provider, url) as client:
            for task in ("inspect the files", "and the date?"):
                await agent.add_user_message(task)
                for _ in range(6):
                    request = await agent.request()
                    reply = await _async_send(client, provider, request.arguments)
                    calls = await agent.record_response(request.call_id, reply)
                    if not calls:
                        break
                    for tool in calls:
                        await agent.record_tool_result(tool.id, OUTPUTS[tool.name])
        return agent.session_id

    with (
        strict_server(SCRIPT, budget=BUDGET) as server,
        contextledger.open_ledger(f"sqlite:///{tmp_path / 'l.db'}") as ledger,
    ):
        session = asyncio.run(main(ledger, server.url))
        check_session(ledger, server, session, provider)


def _post(url: str, path: str, body: dict[str, Any]) -> int:
    return httpx.post(f"{url}{path}", json=body, timeout=10).status_code


def test_the_strict_server_refuses_what_the_real_apis_refuse():
    """Unanswered calls, duplicate ids, a turn without its thinking block or reasoning item: HTTP 400."""
    turns = [Turn(thinking="t", calls=(("run", {}),))]
    with strict_server(turns, budget=BUDGET) as server:
        user = {"role": "user", "content": "go"}
        # Chat: a call left unanswered; the same id twice in one message
        call = {"id": "c1", "type": "function", "function": {"name": "run", "arguments": "{}"}}
        assert (
            _post(
                server.url,
                "/v1/chat/completions",
                {"messages": [user, {"role": "assistant", "tool_calls": [call]}]},
            )
            == 400
        )
        twice = {"role": "assistant", "tool_calls": [call, call]}
        answer = {"role": "tool", "tool_call_id": "c1", "content": "x"}
        assert _post(server.url, "/v1/chat/completions", {"messages": [user, twice, answer, answer]}) == 400
        # Messages: a tool-use turn sent back without the signed thinking block it was issued with
        assert _post(server.url, "/v1/messages", {"messages": [user]}) == 200
        use = next(iter(server.thinking))
        tool_use = {"type": "tool_use", "id": use, "name": "run", "input": {}}
        result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use, "content": "x"}]}
        bare = {"messages": [user, {"role": "assistant", "content": [tool_use]}, result]}
        assert _post(server.url, "/v1/messages", bare) == 400
        signed = [server.thinking[use], tool_use]
        kept = {"messages": [user, {"role": "assistant", "content": signed}, result]}
        assert _post(server.url, "/v1/messages", kept) == 200
        forged = [{**server.thinking[use], "signature": "forged"}, tool_use]
        assert (
            _post(
                server.url,
                "/v1/messages",
                {"messages": [user, {"role": "assistant", "content": forged}, result]},
            )
            == 400
        )
        # Responses: a function call of the current turn without its encrypted reasoning item
        assert _post(server.url, "/v1/responses", {"input": [user]}) == 200
        call_id = next(iter(server.reasoning))
        function_call = {"type": "function_call", "call_id": call_id, "name": "run", "arguments": "{}"}
        output = {"type": "function_call_output", "call_id": call_id, "output": "x"}
        assert _post(server.url, "/v1/responses", {"input": [user, function_call, output]}) == 400
        with_reasoning = [user, server.reasoning[call_id], function_call, output]
        assert _post(server.url, "/v1/responses", {"input": with_reasoning}) == 200
        assert (
            _post(server.url, "/v1/responses", {"input": [user, function_call, function_call, output]}) == 400
        )
        # over the budget by the server's own count
        assert (
            _post(server.url, "/v1/chat/completions", {"messages": [{"role": "user", "content": BIG}]}) == 400
        )


@pytest.mark.parametrize("provider", ["openai", "openai-responses", "anthropic"])
def test_replay_call_in_the_cli_verifies_every_call_of_each_wire(provider, tmp_path):
    """``contextledger replay-call --json`` rebuilds every recorded call's payload, thinking included."""
    db = f"sqlite:///{tmp_path / 'l.db'}"
    with (
        strict_server(SCRIPT, budget=BUDGET) as server,
        contextledger.open_ledger(db) as ledger,
        client_for(provider, server.url) as client,
    ):
        agent = contextledger.AgentContext.start(
            ledger, provider=provider, budget=BUDGET, system_prompt="be brief", tools=TOOLS
        )
        run_tasks(agent, lambda request: send(client, provider, request.arguments))
        calls = [v.record.call_id for v in contextledger.CallRecorder(ledger).calls(agent.session_id)]
    cli = str(Path(sys.executable).with_name("contextledger"))
    for call_id, exchange in zip(calls, server.exchanges, strict=True):
        done = subprocess.run(
            [cli, "replay-call", call_id, "--db", db, "--json"], capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
        document = json.loads(done.stdout)
        assert document["verified"] is True
        assert document["format"] == provider
        assert document["payload"] == {k: exchange.body[k] for k in KEYS[provider] if k in exchange.body}


def stream(client: Any, provider: str, arguments: dict[str, Any], *, manager: bool) -> Any:
    """A streamed SDK call: the raw stream (``stream=True``) or the SDK's stream manager."""
    if provider == "openai":
        chat = client.chat.completions
        options = {"stream_options": {"include_usage": True}}
        if manager:
            return chat.stream(model="m", **options, **arguments)
        return chat.create(model="m", stream=True, **options, **arguments)
    if provider == "openai-responses":
        options = {"store": False, "include": ["reasoning.encrypted_content"]}
        if manager:
            return client.responses.stream(model="m", **options, **arguments)
        return client.responses.create(model="m", stream=True, **options, **arguments)
    options = {"max_tokens": 2048, "thinking": {"type": "enabled", "budget_tokens": 1024}}
    if manager:
        return client.messages.stream(model="m", **options, **arguments)
    return client.messages.create(model="m", stream=True, **options, **arguments)


@pytest.mark.parametrize("manager", [False, True], ids=["raw", "manager"])
@pytest.mark.parametrize("provider", ["openai", "openai-responses", "anthropic"])
def test_agent_context_streaming_on_each_wire_is_accepted_within_budget_and_replays(
    provider, manager, tmp_path
):
    """record_stream passes every event through, records the assembled reply and usage; replay exact."""
    with (
        strict_server(SCRIPT, budget=BUDGET) as server,
        contextledger.open_ledger(f"sqlite:///{tmp_path / 'l.db'}") as ledger,
        client_for(provider, server.url) as client,
    ):
        agent = contextledger.AgentContext.start(
            ledger, provider=provider, budget=BUDGET, system_prompt="be brief", tools=TOOLS
        )
        run_tasks(agent, lambda r: stream(client, provider, r.arguments, manager=manager), streamed=True)
        assert all(e.streamed for e in server.exchanges)
        check_session(ledger, server, agent.session_id, provider)


@pytest.mark.parametrize("provider", ["openai", "openai-responses", "anthropic"])
def test_an_interrupted_stream_marks_the_call_failed_and_keeps_what_arrived(provider, tmp_path):
    """A reply cut mid-stream: the call is marked failed with what arrived; the retry succeeds.

    The error reaches the caller, and the log holds no half reply.
    """
    turns = [
        Turn(text="Reading it now.", calls=(("run", {"command": "ls"}),)),
        Turn(text="Half of this arrives."),
    ]
    turns += [Turn(text="Done.")]
    with (
        strict_server(turns, budget=BUDGET, cut={1}) as server,
        contextledger.open_ledger(f"sqlite:///{tmp_path / 'l.db'}") as ledger,
        client_for(provider, server.url) as sdk,
    ):
        client = sdk.with_options(max_retries=0)
        agent = contextledger.AgentContext.start(ledger, provider=provider, budget=BUDGET, tools=TOOLS)
        agent.add_user_message("go")
        request = agent.request()
        (call,) = list_calls(agent, request, stream(client, provider, request.arguments, manager=False))
        agent.record_tool_result(call.id, "a.txt")
        cut = agent.request()
        arrived = []
        with pytest.raises(Exception, match=r"incomplete|peer closed|Connection error"):  # the SDK's error
            arrived.extend(
                agent.record_stream(cut.call_id, stream(client, provider, cut.arguments, manager=False))
            )
        assert arrived  # the first events came through before the cut
        events_before = len(list(ledger.events(agent.session_id)))
        retry = agent.request()
        assert list_calls(agent, retry, stream(client, provider, retry.arguments, manager=False)) == []
        views = {v.record.call_id: v for v in contextledger.CallRecorder(ledger).calls(agent.session_id)}
        failure = views[cut.call_id].failure
        assert failure is not None
        assert failure.events > 0
        assert (failure.partial_text or "") in "Half of this arrives."
        assert views[cut.call_id].usage is None
        assert views[retry.call_id].failure is None
        assert len(list(ledger.events(agent.session_id))) == events_before + 1  # only the retried reply
        assert retry.arguments == cut.arguments  # nothing of the cut reply entered the context


def list_calls(agent: Any, request: Any, events: Any) -> list[Any]:
    """Consume a stream through ``record_stream``; return the tool calls to run."""
    recorded = agent.record_stream(request.call_id, events)
    list(recorded)
    return recorded.tool_calls


def test_record_failure_marks_a_call_that_raised(tmp_path):
    """A model call that raised is marked failed once; the audit keeps it with the error."""
    with contextledger.open_ledger(f"sqlite:///{tmp_path / 'l.db'}") as ledger:
        agent = contextledger.AgentContext.start(ledger, provider="anthropic")
        agent.add_user_message("go")
        request = agent.request()
        agent.record_failure(request.call_id, TimeoutError("the model took too long"))
        agent.record_failure(request.call_id, TimeoutError("the model took too long"))
        (view,) = contextledger.CallRecorder(ledger).calls(agent.session_id)
        assert view.failure is not None
        assert view.failure.error == "TimeoutError: the model took too long"
        with pytest.raises(contextledger.ValidationError):
            agent.record_failure("call-unknown", "boom")


@pytest.mark.parametrize("provider", ["openai", "openai-responses", "anthropic"])
def test_async_streaming_on_each_wire_is_accepted_within_budget_and_replays(provider, tmp_path):
    """AsyncAgentContext.record_stream over the async SDKs' raw streams: accepted, recorded, replayed."""

    async def main(ledger: contextledger.Ledger, url: str) -> str:
        agent = contextledger.AsyncAgentContext.start(
            ledger, provider=provider, budget=BUDGET, system_prompt="be brief", tools=TOOLS
        )
        async with _async_client(provider, url) as client:
            for task in ("inspect the files", "and the date?"):
                await agent.add_user_message(task)
                for _ in range(6):
                    request = await agent.request()
                    recorded = agent.record_stream(
                        request.call_id, await _async_stream(client, provider, request.arguments)
                    )
                    assert [event async for event in recorded]
                    if not recorded.tool_calls:
                        break
                    for tool in recorded.tool_calls:
                        await agent.record_tool_result(tool.id, OUTPUTS[tool.name])
        return agent.session_id

    with (
        strict_server(SCRIPT, budget=BUDGET) as server,
        contextledger.open_ledger(f"sqlite:///{tmp_path / 'l.db'}") as ledger,
    ):
        session = asyncio.run(main(ledger, server.url))
        assert all(e.streamed for e in server.exchanges)
        check_session(ledger, server, session, provider)


async def _async_stream(client: Any, provider: str, arguments: dict[str, Any]) -> Any:
    if provider == "openai":
        return await client.chat.completions.create(
            model="m", stream=True, stream_options={"include_usage": True}, **arguments
        )
    if provider == "openai-responses":
        return await client.responses.create(
            model="m", stream=True, store=False, include=["reasoning.encrypted_content"], **arguments
        )
    return await client.messages.create(
        model="m",
        max_tokens=2048,
        thinking={"type": "enabled", "budget_tokens": 1024},
        stream=True,
        **arguments,
    )
