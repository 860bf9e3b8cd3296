"""The agent-loop API under concurrency: threads, asyncio tasks, and a second writer on the same session."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import contextledger
import pytest
from contextledger.domain.errors import ConcurrencyConflictError
from contextledger.domain.events import AssistantMessageAdded, ToolResultRecorded, UserMessageAdded
from contextledger.testing import check_openai_pairing

TOOL = {"type": "function", "function": {"name": "run", "parameters": {"type": "object"}}}


def completion(call_id: str | None, text: str | None = None) -> dict[str, Any]:
    """A Chat Completions reply dict: one tool call, or a text answer."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if call_id is not None:
        message["tool_calls"] = [
            {"id": call_id, "type": "function", "function": {"name": "run", "arguments": "{}"}}
        ]
    return {
        "model": "m",
        "choices": [{"message": message}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1},
    }


def run_turns(agent: contextledger.AgentContext, turns: int, tag: str) -> None:
    """Drive ``turns`` tool-using turns and a final answer through ``agent``."""
    for turn in range(turns):
        request = agent.request()
        assert not check_openai_pairing(request.arguments)
        for call in agent.record_response(request.call_id, completion(f"{tag}_{turn}")):
            agent.record_tool_result(call.id, f"out {tag} {turn}")
    agent.record_response(agent.request().call_id, completion(None, "done"))


def test_threads_sharing_one_ledger_each_drive_their_session(sqlite_url: str) -> None:
    """Eight threads over one ledger: every session complete, every call audited."""
    with contextledger.open_ledger(sqlite_url) as ledger:
        agents = [
            contextledger.AgentContext.start(
                ledger, tools=[TOOL], messages=[{"role": "user", "content": f"t{i}"}]
            )
            for i in range(8)
        ]
        errors: list[BaseException] = []

        def work(agent: contextledger.AgentContext, tag: str) -> None:
            try:
                run_turns(agent, 4, tag)
            except BaseException as error:  # noqa: BLE001 - reported by the main thread
                errors.append(error)

        threads = [threading.Thread(target=work, args=(a, f"s{i}")) for i, a in enumerate(agents)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        for agent in agents:
            events = [r.event for r in ledger.events(agent.session_id)]
            assert sum(isinstance(e, ToolResultRecorded) for e in events) == 4
            assert sum(isinstance(e, AssistantMessageAdded) for e in events) == 5
            assert len(agent.recorder.calls(agent.session_id)) == 5


def test_threads_on_the_same_session_are_serialized(ledger: contextledger.Ledger) -> None:
    """Two contexts over one session in many threads: every request is recorded, positions never collide."""
    session = ledger.start_session(tools=[TOOL])
    agents = [contextledger.AgentContext(ledger, session) for _ in range(2)]
    barrier = threading.Barrier(6)

    def work(index: int) -> None:
        barrier.wait()
        for round_ in range(5):
            agent = agents[index % 2]
            agent.add_user_message(f"{index}-{round_}")
            agent.request()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    users = [r for r in ledger.events(session) if isinstance(r.event, UserMessageAdded)]
    assert len(users) == 30
    records = agents[0].recorder.calls(session)
    assert len(records) == 30
    assert len({v.record.call_id for v in records}) == 30


def test_async_contexts_run_sessions_concurrently(ledger: contextledger.Ledger) -> None:
    """AsyncAgentContext: tasks of several sessions interleave; each session's loop completes."""

    async def drive(index: int) -> str:
        agent = contextledger.AsyncAgentContext.start(ledger, tools=[TOOL])
        await agent.add_user_message(f"task {index}")
        for turn in range(3):
            request = await agent.request()
            for call in await agent.record_response(request.call_id, completion(f"a{index}_{turn}")):
                await agent.record_tool_result(call.id, "ok")
        request = await agent.request()
        await agent.record_response(request.call_id, completion(None, "done"))
        return agent.session_id

    async def main() -> list[str]:
        return await asyncio.gather(*(drive(i) for i in range(5)))

    for session in asyncio.run(main()):
        events = [r.event for r in ledger.events(session)]
        assert sum(isinstance(e, ToolResultRecorded) for e in events) == 3
        assert contextledger.CallRecorder(ledger).calls(session)[-1].usage is not None


def test_a_second_process_appending_first_is_retried_with_the_idempotency_key(tmp_path: Path) -> None:
    """Another writer (a second ledger on the same file) wins the race; the loop's write is retried once."""
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    with contextledger.open_ledger(url) as mine, contextledger.open_ledger(url) as other:
        agent = contextledger.AgentContext.start(
            mine, tools=[TOOL], messages=[{"role": "user", "content": "go"}]
        )
        request = agent.request()
        original = mine.log.append
        raced: list[int] = []

        tries: list[str] = []

        def racing_append(stream_id: str, *args: Any, **kwargs: Any) -> Any:
            tries.append(stream_id)
            if stream_id == agent.session_id and not raced:
                raced.append(other.add_user_message(agent.session_id, "meanwhile"))
            return original(stream_id, *args, **kwargs)

        mine.log.append = racing_append  # type: ignore[method-assign]
        calls = agent.record_response(request.call_id, completion("c1"))
        mine.log.append = original  # type: ignore[method-assign]
        assert raced
        assert tries.count(agent.session_id) == 2  # the first append lost the race, the retry won
        assert [c.id for c in calls] == ["c1"]
        kinds = [type(r.event).__name__ for r in other.events(agent.session_id)]
        assert kinds == ["SessionStarted", "UserMessageAdded", "UserMessageAdded", "AssistantMessageAdded"]


def test_conflicts_beyond_the_retries_surface_as_typed_errors(ledger: contextledger.Ledger) -> None:
    """A writer that loses every race gives up with ConcurrencyConflictError after ``retries`` attempts."""
    agent = contextledger.AgentContext(ledger, ledger.start_session(), retries=3)
    attempts: list[int] = []

    def always_conflict(session_id: str, *_: Any, **__: Any) -> Any:
        attempts.append(1)
        raise ConcurrencyConflictError(session_id, 0)

    agent.ledger.append_many = always_conflict  # type: ignore[method-assign]
    with pytest.raises(ConcurrencyConflictError):
        agent.add_user_message("x")
    assert len(attempts) == 3


def test_an_audit_write_that_meets_another_writer_is_retried(ledger: contextledger.Ledger) -> None:
    """The call record (its own stream) is retried like the session's writes when it loses a race once."""
    agent = contextledger.AgentContext.start(ledger, messages=[{"role": "user", "content": "x"}])
    original = agent.recorder.record
    failures: list[int] = []

    def flaky(*args: Any, **kwargs: Any) -> Any:
        if not failures:
            failures.append(1)
            raise ConcurrencyConflictError(agent.session_id, 0)
        return original(*args, **kwargs)

    agent.recorder.record = flaky  # type: ignore[method-assign]
    request = agent.request()
    assert failures == [1]
    assert [v.record.call_id for v in agent.recorder.calls(agent.session_id)] == [request.call_id]
