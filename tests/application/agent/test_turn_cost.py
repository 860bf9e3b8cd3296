"""A turn of the agent loop reads as many events at turn 40 as at turn 4 (no timing: reads are counted)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import contextledger
import pytest
from contextledger.domain.errors import ValidationError
from contextledger.domain.events import Recorded


class CountingLog:
    """Wraps an event log and counts, per call kind, the events read back (decoded) from each stream."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.decoded: Counter[str] = Counter()
        self.reads: Counter[str] = Counter()

    def read(self, stream_id: str, *, after: int = 0, upto: int | None = None) -> list[Recorded]:
        """Count, then delegate."""
        found: list[Recorded] = self.inner.read(stream_id, after=after, upto=upto)
        kind = "calls" if stream_id.endswith("::calls") else "session"
        self.decoded[kind] += len(found)
        self.reads[kind] += 1
        return found

    def __getattr__(self, name: str) -> Any:
        """Everything else is the wrapped log's."""
        return getattr(self.inner, name)


def _reply(turn: int, *, tool: bool) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None if tool else f"done {turn}"}
    if tool:
        message["tool_calls"] = [
            {"id": f"tc-{turn}", "type": "function", "function": {"name": "read", "arguments": "{}"}}
        ]
    usage = {"prompt_tokens": 10, "completion_tokens": 2}
    return {"model": "m", "choices": [{"message": message}], "usage": usage}


def _turn(agent: contextledger.AgentContext, turn: int, log: CountingLog) -> dict[str, Counter[str]]:
    """One turn; return the events decoded by ``record_response`` and by the second ``request``."""
    agent.add_user_message(f"task {turn}")
    request = agent.request()
    log.decoded.clear()
    calls = agent.record_response(request.call_id, _reply(turn, tool=True))
    replied = Counter(log.decoded)
    agent.record_tool_result(calls[0].id, f"result {turn}")
    log.decoded.clear()
    request = agent.request()
    requested = Counter(log.decoded)
    agent.record_response(request.call_id, _reply(turn, tool=False))
    return {"reply": replied, "request": requested}


@pytest.mark.parametrize("url", ["memory://", "sqlite"])
def test_a_reply_and_a_request_decode_as_many_events_late_as_early(url: str, sqlite_url: str) -> None:
    """Turn 40 decodes exactly the events turn 4 decoded.

    ``record_response`` finds its call by key and ``request`` reads no event twice (before: every reply
    decoded the whole ``::calls`` stream).
    """
    with contextledger.open_ledger(sqlite_url if url == "sqlite" else url) as ledger:
        log = CountingLog(ledger.log)
        ledger.log = log  # type: ignore[assignment]  # the loop reads through the ledger's log
        agent = contextledger.AgentContext.start(ledger, provider="openai", system_prompt="sys")
        agent.recorder.ledger = ledger
        costs = [_turn(agent, turn, log) for turn in range(40)]
    early, late = costs[3], costs[39]
    assert late["reply"]["calls"] == early["reply"]["calls"] <= 2  # the record (and its usage) only
    assert late["reply"] == early["reply"]
    assert late["request"]["calls"] == early["request"]["calls"]
    assert late["request"]["session"] == early["request"]["session"]


def test_a_call_recorded_by_another_recorder_is_found_by_key(tmp_path: Any) -> None:
    """A reply recorded through a second loop (another process's view) still joins its usage once."""
    url = f"sqlite:///{tmp_path / 'l.db'}"
    with contextledger.open_ledger(url) as ledger:
        agent = contextledger.AgentContext.start(ledger, provider="openai", system_prompt="sys")
        agent.add_user_message("hi")
        request = agent.request()
    with contextledger.open_ledger(url) as ledger:
        other = contextledger.AgentContext(ledger, agent.session_id, provider="openai")
        other.record_response(request.call_id, _reply(1, tool=False))
        other.record_response(request.call_id, _reply(1, tool=False))  # again: nothing twice
        view = other.recorder.call(agent.session_id, request.call_id)
        assert view.usage is not None
        assert view.usage.input_tokens == 10
        assert [v.record.call_id for v in other.recorder.calls(agent.session_id)] == [request.call_id]
        with pytest.raises(ValidationError):
            other.recorder.call(agent.session_id, "call-none")
