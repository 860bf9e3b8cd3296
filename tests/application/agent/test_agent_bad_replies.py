"""A reply or a latency the store cannot keep, or a reply and a failure of one call, is refused unwritten."""

from __future__ import annotations

from typing import Any

import contextledger
import pytest
from contextledger.application.audit.call_recorder import CallRecorder
from contextledger.domain.errors import ValidationError

from tests.application.agent.replies import messages_reply


def _reply(usage: dict[str, Any]) -> dict[str, Any]:
    message = {"role": "assistant", "content": "done"}
    return {"model": "gpt-4o", "choices": [{"message": message}], "usage": usage}


def _agent(ledger: contextledger.Ledger) -> Any:
    agent = contextledger.AgentContext.start(ledger, provider="openai", system_prompt="Code.", budget=4096)
    agent.add_user_message("fix the bug")
    return agent


@pytest.mark.parametrize(
    ("usage", "latency"),
    [
        ({"prompt_tokens": 10**30, "completion_tokens": 5}, None),
        ({"prompt_tokens": -1, "completion_tokens": 5}, None),
        ({"prompt_tokens": 10, "completion_tokens": 5}, "fast"),
        ({"prompt_tokens": 10, "completion_tokens": 5}, float("nan")),
        ({"prompt_tokens": 10, "completion_tokens": 5}, True),
    ],
)
def test_a_reply_whose_usage_or_latency_cannot_be_kept_writes_nothing(usage, latency):
    """A count a store cannot keep, or a latency that is not a number of milliseconds, is refused first.

    Before, a usage count over 2**64 raised ``OverflowError`` (outside the error tree) after the reply
    was stored, and ``latency_ms="fast"`` stored a call record no reader could decode again.
    """
    with contextledger.open_ledger("memory://") as ledger:
        agent = _agent(ledger)
        request = agent.request()
        version = ledger.version(agent.session_id)
        with pytest.raises(contextledger.ValidationError):
            agent.record_response(request.call_id, _reply(usage), latency_ms=latency)
        assert ledger.version(agent.session_id) == version
        agent.record_response(request.call_id, _reply({"prompt_tokens": 10, "completion_tokens": 5}))
        assert ledger.version(agent.session_id) == version + 1
        assert agent.request().tokens > 0  # the calls stream still reads


def test_a_value_the_encoder_cannot_keep_is_invalid_message_not_overflow():
    """An integer past 64 bits in a message's meta or a session's metadata is ``InvalidMessageError``."""
    with contextledger.open_ledger("memory://") as ledger:
        session = ledger.start_session(system_prompt="x")
        with pytest.raises(contextledger.InvalidMessageError):
            ledger.append(session, {"role": "user", "content": "x", "meta": {"b": 2**70}})
        with pytest.raises(contextledger.InvalidMessageError):
            ledger.start_session(metadata={"n": 2**70})
        assert ledger.version(session) == 1
        assert [s.session_id for s in ledger.sessions()] == [session]


@pytest.mark.parametrize("text", [None, 5])
def test_a_text_block_that_is_not_text_is_refused_not_sent_as_none(text):
    """An Anthropic ``{"type": "text", "text": null}`` block was stored as the word ``None`` and sent back."""
    with contextledger.open_ledger("memory://") as ledger:
        agent = contextledger.AgentContext.start(ledger, provider="anthropic", system_prompt="x")
        agent.add_user_message("hi")
        request = agent.request()
        version = ledger.version(agent.session_id)
        reply = {
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
            "content": [{"type": "text", "text": text}], "usage": {"input_tokens": 3, "output_tokens": 1},
        }  # fmt: skip
        with pytest.raises(contextledger.InvalidMessageError, match="must be text"):
            agent.record_response(request.call_id, reply)
        assert ledger.version(agent.session_id) == version


@pytest.mark.parametrize(
    "bad",
    [
        {"provider": "gemini"},
        {"policy": None},
        {"policy": "nope"},
        {"budget": -5},
        {"budget": "5000"},
        {"budget": 100_000_000},
    ],
)
def test_a_start_whose_provider_policy_or_budget_is_refused_starts_no_session(bad):
    """The settings are checked before the session is started: a refused start leaves no stray session."""
    with contextledger.open_ledger("memory://") as ledger:
        with pytest.raises(contextledger.ConfigError):
            contextledger.AgentContext.start(ledger, system_prompt="x", **bad)
        assert list(ledger.sessions()) == []


@pytest.mark.parametrize(
    ("policy", "budget"), [(None, None), (5, None), ("default", "4000"), ("default", True)]
)
def test_a_render_with_a_policy_or_budget_of_the_wrong_type_is_a_config_error(policy, budget):
    """Not an ``AttributeError`` or a ``TypeError`` from inside the renderer."""
    with contextledger.open_ledger("memory://") as ledger:
        session = ledger.start_session(system_prompt="x")
        with pytest.raises(contextledger.ConfigError):
            contextledger.Renderer(ledger, tokenizer="heuristic").render(session, policy, budget=budget)


def test_the_largest_budget_is_named_with_the_reserves_it_leaves_room_for():
    """A budget whose window would pass 100 M tokens names the largest allowed, not a total never given."""
    with contextledger.open_ledger("memory://") as ledger:
        session = ledger.start_session(system_prompt="x")
        renderer = contextledger.Renderer(ledger, tokenizer="heuristic")
        with pytest.raises(contextledger.ConfigError, match=r"at most 99,990,000 tokens .* got 100,000,000"):
            renderer.render(session, "default", budget=100_000_000)
        assert renderer.render(session, "default", budget=99_990_000).tokens > 0


def test_a_call_is_either_answered_or_failed_never_both():
    """A failure after a reply, or a reply after a failure, is refused (it was taken).

    The audit then said "failed", with the reply's usage beside it and its message in the log.
    """
    ledger = contextledger.open_ledger("memory://")
    agent = contextledger.AgentContext.start(
        ledger, provider="anthropic", policy="default", system_prompt="s"
    )
    agent.add_user_message("hi")
    answered = agent.request()
    agent.record_response(answered.call_id, messages_reply(1, [{"type": "text", "text": "hello"}]))
    with pytest.raises(ValidationError, match="has its reply recorded"):
        agent.record_failure(answered.call_id, "boom after success")
    agent.add_user_message("again")
    failed = agent.request()
    agent.record_failure(failed.call_id, "timeout")
    head = ledger.version(agent.session_id)
    with pytest.raises(ValidationError, match="was recorded as failed"):
        agent.record_response(failed.call_id, messages_reply(2, [{"type": "text", "text": "late"}]))
    assert ledger.version(agent.session_id) == head
    views = {v.record.call_id: v for v in CallRecorder(ledger).calls(agent.session_id)}
    assert views[answered.call_id].failure is None
    assert views[failed.call_id].usage is None
