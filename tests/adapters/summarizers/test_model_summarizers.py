"""Model summarizers over real HTTP on loopback: prefix first, retries, timeouts, typed failures, no leaks."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import httpx
import pytest
from contextledger.adapters.formats.anthropic import to_anthropic
from contextledger.adapters.formats.openai import to_openai
from contextledger.adapters.summarizers.http import HttpPolicy
from contextledger.adapters.summarizers.models import AnthropicSummarizer, OpenAICompatibleSummarizer
from contextledger.application.render.renderer import Renderer
from contextledger.domain.errors import SummarizerError, SummarizerUnavailableError, SummaryRejectedError
from contextledger.projections.summary_requests import SpanEntry, SummaryRequest

sys.path.insert(0, str(Path(__file__).parent))
from loopback import Reply, serve

KEY = "sk-test-SECRET-4f1c9a"
FAST = HttpPolicy(timeout=2.0, attempts=3, backoff=0.01, max_retry_after=5.0)
SUMMARY = (
    "## Session Summary (Compaction Round 1)\n### Original Task\nFix src/money.py\n"
    "### Current State\n- tests pass"
)


def _openai_reply(text: str = SUMMARY, finish: str = "stop") -> dict:
    return {
        "model": "gpt-4o-2024-08-06",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": 1200,
            "completion_tokens": 80,
            "prompt_tokens_details": {"cached_tokens": 1024},
        },
    }


def _refusal() -> dict:
    """A Chat Completions refusal: the ``refusal`` field set beside (or instead of) the content."""
    reply = _openai_reply(text="I can't help with that.")
    reply["choices"][0]["message"]["refusal"] = "I can't help with that."
    return reply


def _anthropic_reply(text: str = SUMMARY, stop: str = "end_turn") -> dict:
    return {
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": text}],
        "stop_reason": stop,
        "usage": {"input_tokens": 90, "cache_read_input_tokens": 1100, "output_tokens": 70},
    }


@pytest.fixture
def request_(ledger) -> SummaryRequest:
    """A summary request whose prefix is a real rendered context with a tool schema and a tool pair."""
    session = ledger.start_session(
        system_prompt="You are a careful coding agent.",
        tools=[{"name": "read_file", "description": "Read a file", "parameters": {"type": "object"}}],
    )
    ledger.add_user_message(session, "Fix src/money.py")
    ledger.add_assistant_message(
        session, "Looking.", tool_calls=[{"id": "c1", "name": "read_file", "arguments": {}}]
    )
    ledger.add_tool_result(session, "c1", "def add(a, b): return a + b")
    prefix = Renderer(ledger, tokenizer="heuristic").render(session, "default")
    return SummaryRequest(
        session_id=session,
        covers_from=2,
        covers_through=4,
        round=1,
        original_task="Fix src/money.py",
        entries=(SpanEntry(position=2, role="user", text="Fix src/money.py"),),
        prefix=prefix,
    )


def _openai(url: str) -> OpenAICompatibleSummarizer:
    return OpenAICompatibleSummarizer(model="gpt-4o", base_url=f"{url}/v1", api_key=KEY, policy=FAST)


def _anthropic(url: str) -> AnthropicSummarizer:
    return AnthropicSummarizer(model="claude-sonnet-4-5", base_url=url, api_key=KEY, policy=FAST)


def test_openai_sends_the_live_prefix_then_the_instruction(request_):
    """The request starts with the payload the agent sent (cacheable), then one instruction turn."""
    with serve(Reply(body=_openai_reply())) as (url, script):
        draft = _openai(url).summarize(request_)
    [seen] = script.received
    prefix = to_openai(request_.prefix)
    assert seen.path == "/v1/chat/completions"
    assert seen.body["messages"][: len(prefix["messages"])] == prefix["messages"]
    assert seen.body["messages"][-1]["role"] == "user"
    assert "Session Summary" in seen.body["messages"][-1]["content"]
    assert seen.body["tools"] == prefix["tools"]
    assert seen.body["tool_choice"] == "none"
    assert seen.headers["authorization"] == f"Bearer {KEY}"
    assert draft.text == SUMMARY
    assert (draft.input_tokens, draft.cached_tokens, draft.output_tokens) == (1200, 1024, 80)
    assert draft.model == "gpt-4o-2024-08-06"


def test_anthropic_sends_the_live_prefix_with_its_cache_breakpoints(request_):
    """System blocks, history and tools as the agent sent them, then the instruction as the last user turn."""
    with serve(Reply(body=_anthropic_reply())) as (url, script):
        draft = _anthropic(url).summarize(request_)
    [seen] = script.received
    prefix = to_anthropic(request_.prefix)
    assert seen.path == "/v1/messages"
    assert seen.body["system"] == prefix["system"]
    assert seen.body["messages"][:-1] == prefix["messages"]
    assert "cache_control" in str(seen.body["system"]) + str(seen.body["messages"])
    assert seen.body["messages"][-1]["role"] == "user"
    assert seen.body["tool_choice"] == {"type": "none"}
    assert seen.headers["x-api-key"] == KEY
    assert seen.headers["anthropic-version"] == "2023-06-01"
    assert (draft.cached_tokens, draft.output_tokens) == (1100, 70)


@pytest.mark.parametrize("make", [_openai, _anthropic], ids=["openai", "anthropic"])
def test_rate_limit_is_waited_out_as_the_server_says(request_, make):
    """429 with Retry-After, then a 5xx, then success: three requests, one summary."""
    ok = Reply(body=_openai_reply() if make is _openai else _anthropic_reply())
    replies = (
        Reply(status=429, body={"error": "slow down"}, headers={"retry-after": "0"}),
        Reply(status=503),
        ok,
    )
    with serve(*replies) as (url, script):
        draft = make(url).summarize(request_)
    assert len(script.received) == 3
    assert draft.text == SUMMARY


def test_a_retry_after_beyond_the_cap_fails_at_once(request_):
    """Told to wait two minutes, the summarizer does not block: it fails for the worker to retry later."""
    with (
        serve(Reply(status=429, headers={"retry-after": "120"})) as (url, script),
        pytest.raises(SummarizerUnavailableError, match="retry after 120"),
    ):
        _openai(url).summarize(request_)
    assert len(script.received) == 1


def test_a_slow_server_times_out_after_every_attempt(request_):
    """Each attempt is bounded by the timeout; after the last, a typed unavailable error."""
    slow = HttpPolicy(timeout=0.2, attempts=2, backoff=0.01)
    summarizer = OpenAICompatibleSummarizer(model="m", base_url="http://unset/v1", policy=slow)
    with serve(Reply(body=_openai_reply(), delay=1.0)) as (url, script):
        summarizer.base_url = f"{url}/v1"
        with pytest.raises(SummarizerUnavailableError, match="timed out"):
            summarizer.summarize(request_)
    assert len(script.received) == 2


def test_an_unreachable_server_is_a_typed_error(request_):
    """Connection refused on every attempt: SummarizerUnavailableError, never an httpx exception."""
    with serve(Reply()) as (url, _):
        dead = url
    with pytest.raises(SummarizerUnavailableError, match="unreachable"):
        _openai(dead).summarize(request_)


@pytest.mark.parametrize(
    ("reply", "match"),
    [
        (Reply(raw="<html>gateway</html>"), "no JSON"),
        (Reply(body={"choices": []}), "without choices"),
        (Reply(body=_openai_reply(text="")), "empty"),
        (
            Reply(body=_openai_reply(text="## Session Summary\n### Original Task\n[verbatim]\n- [ ] ")),
            "template",
        ),
        (Reply(body=_openai_reply(finish="length")), "cut the summary"),
        (
            Reply(
                body=_openai_reply(
                    text="### Original Task\nN/A\n### Completed Work\nNone\n### Pending Work\n- none."
                )
            ),
            "template",
        ),
        (
            Reply(body=_openai_reply(text="I'm sorry, but I can't help with that.", finish="content_filter")),
            "refused",
        ),
        (Reply(body=_refusal()), "refused"),
    ],
    ids=[
        "not-json",
        "no-choices",
        "empty",
        "skeleton",
        "cut",
        "filled-with-nothing",
        "content-filter",
        "refusal",
    ],
)
def test_malformed_empty_or_cut_replies_are_rejected(request_, reply, match):
    """Nothing unusable ever becomes a summary: a typed SummaryRejectedError says why."""
    with serve(reply) as (url, _), pytest.raises(SummaryRejectedError, match=match):
        _openai(url).summarize(request_)


@pytest.mark.parametrize("stop", ["max_tokens", "refusal"])
def test_anthropic_cut_or_refused_reply_is_rejected(request_, stop):
    """A reply stopped at max_tokens is incomplete, a refusal is no summary: both are refused."""
    with (
        serve(Reply(body=_anthropic_reply(stop=stop))) as (url, _),
        pytest.raises(SummaryRejectedError),
    ):
        _anthropic(url).summarize(request_)


def test_the_api_key_never_reaches_errors_or_logs(request_, caplog):
    """A 401 whose body echoes the key: the error and every log line show it redacted."""
    limited = Reply(status=429, body={"error": f"rate limited for {KEY}"}, headers={"retry-after": "0"})
    echo = Reply(status=401, body={"error": f"invalid api key {KEY}"})
    with (
        caplog.at_level(logging.INFO, logger="contextledger"),
        serve(limited, echo) as (url, _),
        pytest.raises(SummarizerError) as caught,
    ):
        _openai(url).summarize(request_)
    assert KEY not in str(caught.value)
    assert "[redacted]" in str(caught.value)
    logs = [record.structlog for record in caplog.records if hasattr(record, "structlog")]
    assert [entry["event"] for entry in logs] == ["summarizer_retry"]
    assert "[redacted]" in logs[0]["reason"]
    assert KEY not in repr(logs)
    assert KEY not in caplog.text
    assert KEY not in _openai("http://x").config_sha


def test_config_hash_changes_with_the_model_not_the_key():
    """Artifacts are keyed by configuration: another model is another config, another key is not."""
    base = OpenAICompatibleSummarizer(model="a", api_key="k1", client=httpx.Client())
    assert base.config_sha == OpenAICompatibleSummarizer(model="a", api_key="k2").config_sha
    assert base.config_sha != OpenAICompatibleSummarizer(model="b", api_key="k1").config_sha


def test_a_server_answering_a_byte_at_a_time_is_timed_out_in_all_not_per_read(request_):
    """The timeout is per read in httpx: a byte every 0.05 s held a 1 s attempt for 18 s.

    Without a deadline for the whole answer this call succeeds, ~15 s later; with it, the attempt fails.
    """
    policy = HttpPolicy(timeout=1.0, attempts=1, backoff=0.01, max_retry_after=5.0)
    dripping = Reply(body=_openai_reply(), drip=0.05)
    with serve(dripping) as (url, _), pytest.raises(SummarizerUnavailableError, match="timed out"):
        OpenAICompatibleSummarizer(
            model="gpt-4o", base_url=f"{url}/v1", api_key=KEY, policy=policy
        ).summarize(request_)
