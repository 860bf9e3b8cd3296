"""A model summarizer's calls fit the model's window: prefix left out, span chained in runs, or refused."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

import contextledger
import msgspec
import pytest
from contextledger.adapters.summarizers.http import HttpPolicy
from contextledger.adapters.summarizers.models import OpenAICompatibleSummarizer
from contextledger.application.kernel.summary_log import SummaryStream
from contextledger.application.render.renderer import Renderer
from contextledger.application.summaries.compaction import Compactor
from contextledger.application.summaries.request_builder import MIN_ENTRY_CHARS, RequestBuilder
from contextledger.application.summaries.summary_worker import SummaryWorker
from contextledger.domain.errors import SummarizerError, SummaryInputTooLargeError
from contextledger.domain.events import SummaryAttemptFailed, ToolCall
from contextledger.projections.summary_requests import (
    SUMMARY_INSTRUCTION,
    SpanEntry,
    SummaryDraft,
    SummaryRequest,
)
from contextledger.projections.wire import MESSAGE_OVERHEAD
from contextledger.testing import CountingIds, FixedClock, ScriptedSummarizer

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[2] / "adapters" / "summarizers"))
from loopback import Reply, serve
from test_card_check import KEEPS, POLICY, RULE, _session

BUDGET = 6_000


def _planned(budget: int):
    """The card-check session with its first compaction request planned under ``POLICY`` at ``budget``."""
    ledger = contextledger.open_ledger("memory://", clock=FixedClock(step=timedelta(0)), ids=CountingIds())
    session = _session(ledger)
    renderer = Renderer(ledger, tokenizer="heuristic")
    fake = ScriptedSummarizer(KEEPS, model_written=True)
    compactor = Compactor(ledger, renderer, summarizer=fake.name, summarizer_config=fake.config_sha)
    request = compactor.plan(session, POLICY, budget=budget)
    assert request is not None
    return ledger, session, renderer, fake, request


def test_a_span_over_the_window_is_summarized_in_calls_that_each_fit():
    """About 48,000 tokens of span for a 6,000-token window: runs in log order, each call within it.

    Sent as one request (the live prefix, then the span) it would be nine times the window. Each call
    leaves the prefix out, holds a run of whole messages and, after the first, the summary the calls
    before it came to; together the runs are the span's messages, in order; the last call's summary is
    the artifact, which covers the whole span and is applied at the next compaction point.
    """
    ledger, session, renderer, fake, request = _planned(BUDGET)
    builder = RequestBuilder(ledger, renderer, fake.config_sha, 4_000)
    whole = builder.build(session, request, None, POLICY, 800)
    window = builder.window(POLICY, request, 800)
    assert window == BUDGET  # the prompt limit (the model's window less the answer is larger here)
    assert builder.request_tokens(whole) > 8 * window
    worker = SummaryWorker(ledger, renderer, fake, policies={POLICY.name: POLICY})
    assert worker.run_once() == 1
    calls = fake.requests
    assert len(calls) >= 2
    for call in calls:
        assert call.prefix is None
        assert builder.request_tokens(call) <= window
    assert [e.position for c in calls for e in c.entries] == [e.position for e in whole.entries]
    assert calls[0].previous is None
    assert all(c.previous == KEEPS.strip() for c in calls[1:])  # each reads the summary of the runs before
    for call in calls[:-1]:  # an earlier call names its own run; the last, the whole span
        assert call.covers_through == call.entries[-1].position
    assert (calls[-1].covers_from, calls[-1].covers_through) == (request.covers_from, request.covers_through)
    [artifact] = SummaryStream(ledger.log, session).artifacts()
    assert (artifact.covers_from, artifact.covers_through) == (request.covers_from, request.covers_through)
    assert (artifact.withheld, artifact.drafts) == (False, len(calls))
    ledger.add_user_message(session, "Any progress?")  # a compaction point: the summary swaps in
    context = renderer.render(session, POLICY, budget=BUDGET)
    assert context.summary_id == artifact.summary_id
    assert any(RULE in m.text for m in context.messages)


def test_a_request_that_fits_is_sent_whole_with_its_live_prefix():
    """Within the window nothing changes: one call, the live prefix first (the provider's cache reads)."""
    ledger, session, renderer, fake, request = _planned(BUDGET)
    builder = RequestBuilder(ledger, renderer, fake.config_sha, 4_000)
    whole = builder.build(session, request, None, POLICY, 800)
    assert whole.prefix is not None
    assert builder.parts(whole, builder.request_tokens(whole)) == [whole]
    alone = builder.request_tokens(msgspec.structs.replace(whole, prefix=None))
    [sent] = builder.parts(whole, alone)  # room for the span and the summarizer's own system message only
    assert sent.prefix is None
    assert sent.entries == whole.entries


def test_a_message_too_large_for_a_call_is_clipped_head_and_tail():
    """One message larger than a call's room is clipped, its first and last lines kept, to fit."""
    ledger = contextledger.open_ledger("memory://")
    renderer = Renderer(ledger, tokenizer="heuristic")
    builder = RequestBuilder(ledger, renderer, "scripted", 4_000)
    text = "first line\n" + "filler words here\n" * 3_000 + "last line"
    request = SummaryRequest(
        session_id="s",
        covers_from=2,
        covers_through=3,
        round=1,
        original_task="fix it",
        entries=(SpanEntry(position=2, role="tool", text=text, tool_name="read_file"),),
    )
    [sent] = builder.parts(request, 2_000)
    [entry] = sent.entries
    assert MIN_ENTRY_CHARS <= len(entry.text) < len(text)
    assert entry.text.startswith("first line")
    assert entry.text.endswith("last line")
    assert "characters omitted" in entry.text
    assert builder.request_tokens(sent) + 800 <= 2_000  # with room for a previous summary of max_tokens


def test_a_request_that_cannot_fit_is_dead_lettered_at_once_and_changes_nothing():
    """A window too small for the instruction, task, card and one clipped message: no model call is made.

    The attempt fails with ``SummaryInputTooLargeError`` and is dead-lettered at once (the same span
    would give the same request); the render is what it was.
    """
    ledger, session, renderer, fake, _ = _planned(1_200)
    before = renderer.render(session, POLICY, budget=1_200)
    worker = SummaryWorker(ledger, renderer, fake, policies={POLICY.name: POLICY})
    assert worker.run_once() == 1
    assert fake.requests == []
    stream = SummaryStream(ledger.log, session)
    events = [r.event for r in ledger.log.read(stream.stream_id)]
    [failed] = [e for e in events if isinstance(e, SummaryAttemptFailed)]
    assert (failed.error_type, failed.attempt, failed.dead_lettered) == ("SummaryInputTooLargeError", 1, True)
    assert "cannot be sent in calls of 1,200 tokens" in failed.message
    assert stream.artifacts() == []
    assert worker.run_once() == 0  # dead-lettered: not taken again
    assert renderer.render(session, POLICY, budget=1_200) == before


def test_the_summarizer_instruction_never_enters_the_session():
    """The instruction a model summarizer is sent is never an event of the session (peers stored theirs).

    After a chained compaction, the session's log holds exactly the events the agent recorded, none with
    the instruction's words, and the summary stream holds the artifact (the summary's text, never a user
    message, so it can never be pinned as the user's latest request) with no instruction in it.
    """
    ledger, session, renderer, fake, _ = _planned(BUDGET)
    recorded = [r.event for r in ledger.events(session)]
    assert SummaryWorker(ledger, renderer, fake, policies={POLICY.name: POLICY}).run_once() == 1
    assert len(fake.requests) >= 2  # a chain of calls, each sent the instruction
    opening = SUMMARY_INSTRUCTION.splitlines()[0]
    after = [r.event for r in ledger.events(session)]
    assert after == recorded
    assert not any(opening in str(event) for event in after)
    stream = SummaryStream(ledger.log, session)
    [artifact] = stream.artifacts()
    assert ledger.text(artifact.content) == KEEPS.strip()
    assert not any(opening in str(r.event) for r in stream.events())


def test_a_model_server_that_refuses_over_its_window_takes_every_call_of_the_split_request():
    """Over real HTTP, a server that refuses a body over its window (6,000 tokens), as OpenAI's does.

    It refuses the request as a single call (a typed ``SummarizerError`` naming the refusal) and takes
    every call the worker sends for it, counted by the server itself; the compaction happens.
    """
    ledger, session, renderer, _, request = _planned(BUDGET)
    window = BUDGET  # the server takes what the worker promises a call holds, and no more
    count = renderer.counter.count

    def refuse(body: dict) -> str | None:
        sent = sum(count(str(m.get("content") or "")) + MESSAGE_OVERHEAD for m in body["messages"])
        return None if sent <= window else f"maximum context length is {window} tokens; you sent {sent}"

    answer = {"model": "m", "choices": [{"message": {"content": KEEPS}, "finish_reason": "stop"}]}
    once = HttpPolicy(timeout=10.0, attempts=1, backoff=0.01)
    with serve(Reply(body=answer), refuse=refuse) as (url, script):
        summarizer = OpenAICompatibleSummarizer(model="m", base_url=f"{url}/v1", api_key="k", policy=once)
        whole = RequestBuilder(ledger, renderer, summarizer.config_sha, 4_000).build(
            session, request, None, POLICY, 800
        )
        with pytest.raises(SummarizerError, match="maximum context length"):
            summarizer.summarize(whole)
        assert SummaryWorker(ledger, renderer, summarizer, policies={POLICY.name: POLICY}).run_once() == 1
    refused, *taken = script.received
    assert refuse(refused.body) is not None
    assert len(taken) >= 2
    assert all(refuse(call.body) is None for call in taken)
    [artifact] = SummaryStream(ledger.log, session).artifacts()
    assert (artifact.covers_from, artifact.covers_through, artifact.withheld) == (
        request.covers_from,
        request.covers_through,
        False,
    )


LONG_DRAFT = "## Session Summary\n" + "".join(f"- read src/mod{i}.py, no change\n" for i in range(60))
"""A draft near the summary's bound of 800 tokens (each call's room assumed no more)."""


class _DropsUntilTold:
    """A model that loses the user's rule unless told what it lost (then it keeps everything)."""

    name, config_sha, model_written = "drops", "drops", True

    def __init__(self, keeps: str) -> None:
        self.keeps = keeps
        self.requests: list[SummaryRequest] = []

    def summarize(self, request: SummaryRequest) -> SummaryDraft:
        self.requests.append(request)
        return SummaryDraft(text=self.keeps if request.lost else LONG_DRAFT)


def test_a_card_check_retry_fits_the_window_with_what_it_was_told_it_lost():
    """The retry of the last call carries every instruction and todo item lost; it still fits the window.

    Every call is sized as if it carried all the span owes the card, so the retry a card check makes
    (the last call again, with a "lost" section listing the task, the rule and 60 todo items) is within
    the window too, and so would any call of the chain be.
    """
    ledger = contextledger.open_ledger("memory://", clock=FixedClock(step=timedelta(0)), ids=CountingIds())
    todos = [{"content": f"port module {i}", "status": "pending"} for i in range(60)]
    session = _session(ledger, todos=todos)
    renderer = Renderer(ledger, tokenizer="heuristic")
    model = _DropsUntilTold(KEEPS + "".join(f"- [ ] {t['content']}\n" for t in todos))
    compactor = Compactor(ledger, renderer, summarizer=model.name, summarizer_config=model.config_sha)
    request = compactor.plan(session, POLICY, budget=BUDGET)
    assert request is not None
    assert SummaryWorker(ledger, renderer, model, policies={POLICY.name: POLICY}).run_once() == 1
    *chain, last, retry = model.requests
    assert chain  # split: the span is many times the window
    assert (last.lost, len(retry.lost)) == ((), 62)  # the task, the rule and the 60 items
    builder = RequestBuilder(ledger, renderer, model.config_sha, 4_000)
    assert max(builder.request_tokens(r) for r in model.requests) <= BUDGET
    # any call of the chain could have been the one retried: each has room for all it could be told
    told = [msgspec.structs.replace(r, lost=retry.lost) for r in model.requests]
    assert max(builder.request_tokens(r) for r in told) <= BUDGET
    [artifact] = SummaryStream(ledger.log, session).artifacts()
    assert (artifact.withheld, artifact.drafts) == (False, len(model.requests))


def _one(task: str, entries: tuple[SpanEntry, ...]) -> SummaryRequest:
    return SummaryRequest(
        session_id="s", covers_from=2, covers_through=9, round=1, original_task=task, entries=entries
    )


def test_a_long_task_and_long_call_arguments_are_clipped_to_fit():
    """A 30,000-character first message and a 28,000-character write are clipped head and tail, not refused.

    The task is resent in every call and a call's arguments are part of its message: both are clipped like
    a message's text when nothing else would fit, and every call then fits.
    """
    ledger = contextledger.open_ledger("memory://")
    renderer = Renderer(ledger, tokenizer="heuristic")
    builder = RequestBuilder(ledger, renderer, "scripted", 4_000)
    task = "Port the billing service. " + "Context line about the service. " * 940 + "Keep the API stable."
    write = ToolCall(id="w1", name="write_file", arguments='{"content": "' + "x = 1\n" * 4_700 + '"}')
    entries = (
        SpanEntry(position=2, role="user", text="start"),
        SpanEntry(position=3, role="assistant", text="Writing.", tool_calls=(write,)),
        SpanEntry(position=4, role="tool", text="ok", tool_name="write_file"),
    )
    parts = builder.parts(_one(task, entries), 2_000)
    assert all(builder.request_tokens(p) <= 2_000 for p in parts)
    assert all(
        p.original_task.startswith("Port the billing") and p.original_task.endswith("stable.") for p in parts
    )
    assert all("characters omitted" in p.original_task for p in parts)
    [sent] = [e for p in parts for e in p.entries if e.position == 3]
    assert "characters omitted" in sent.tool_calls[0].arguments
    assert [e.position for p in parts for e in p.entries] == [2, 3, 4]


def test_a_request_without_messages_is_sent_with_its_task_clipped_or_refused():
    """No messages to split (a clip-archive level with nothing inside): the task is clipped, else refused."""
    ledger = contextledger.open_ledger("memory://")
    renderer = Renderer(ledger, tokenizer="heuristic")
    builder = RequestBuilder(ledger, renderer, "scripted", 4_000)
    [sent] = builder.parts(_one("Fix it. " + "word " * 6_000, ()), 2_000)
    assert builder.request_tokens(sent) <= 2_000
    assert sent.original_task.startswith("Fix it. word")
    assert "characters omitted" in sent.original_task
    with pytest.raises(SummaryInputTooLargeError, match="cannot be sent in calls of 300 tokens"):
        builder.parts(_one("Fix it. " + "word " * 6_000, ()), 300)
