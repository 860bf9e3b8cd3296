"""Clip-archive shows several summaries: each summarized event is credited to the batch that covers it."""

from __future__ import annotations

import contextledger
from contextledger.application.audit.forensics import why
from contextledger.application.kernel.summary_log import SummaryStream
from contextledger.testing import CountingIds, FixedClock


def test_each_summarized_event_names_the_batch_that_covers_it():
    """The record and ``why`` named the last batch shown for every summarized position.

    So ``why`` answered of a batch that does not cover the event ("does not mention it"), where the batch
    that does may well mention it.
    """
    ledger = contextledger.open_ledger("memory://", clock=FixedClock(), ids=CountingIds())
    sid = ledger.start_session(
        system_prompt="You are a coding agent.", tools=[{"name": "bash", "parameters": {}}]
    )
    ledger.add_user_message(sid, "Read every module and report the one with MARKER.")
    renderer = contextledger.Renderer(ledger, tokenizer="heuristic")
    summarizer = contextledger.ExtractiveSummarizer(counter=renderer.counter)
    compactor = contextledger.Compactor(
        ledger, renderer, summarizer=summarizer.name, summarizer_config=summarizer.config_sha
    )
    worker = contextledger.SummaryWorker(ledger, renderer, summarizer, worker_id="w")
    recorder = contextledger.CallRecorder(ledger)
    for i in range(60):
        context = renderer.render(sid, "clip-archive", budget=4_000)
        record = recorder.record(context, "clip-archive", payload=contextledger.to_openai(context))
        compactor.plan(sid, "clip-archive", budget=4_000)
        worker.run_once()
        command = f"cat src/m{i}.py"
        ledger.add_assistant_message(
            sid,
            f"Reading m{i}.py.",
            tool_calls=[{"id": f"c{i}", "name": "bash", "arguments": {"command": command}}],
        )
        ledger.add_tool_result(sid, f"c{i}", f"# module {i}\n" + "x = 1\n" * 120)
    artifacts = {a.summary_id: a for a in SummaryStream(ledger.log, sid).artifacts()}
    summarized = [run for run in record.dispositions if run.disposition == "summarized"]
    assert len({run.summary_id for run in summarized}) > 1, "several batches shown"
    for run in summarized:
        batch = artifacts[run.summary_id]
        assert batch.covers_from <= run.first <= run.last <= batch.covers_through, run
    early = summarized[0]
    answer = why(ledger, sid, "Reading m0.py", renderer=renderer)
    last = answer.calls[-1]
    assert last.disposition == "summarized"
    assert last.summary_id == early.summary_id != record.summary_id


def test_batches_that_took_their_groups_out_themselves_are_credited_too():
    """Batches recorded while their spans were still in the window: the summary reducer removes the groups.

    Its one merged "summarized" range, sorted before the batches' own ranges, names no summary, so every
    position it held was credited to the last batch shown (found by a review of this session's diff).
    """
    ledger = contextledger.open_ledger("memory://", clock=FixedClock(), ids=CountingIds())
    sid = ledger.start_session(
        system_prompt="You are a coding agent.", tools=[{"name": "bash", "parameters": {}}]
    )
    ledger.add_user_message(sid, "Read every module and report the one with MARKER.")

    def step(i: int) -> None:
        command = f"cat src/m{i}.py"
        ledger.add_assistant_message(
            sid,
            f"Reading m{i}.py.",
            tool_calls=[{"id": f"c{i}", "name": "bash", "arguments": {"command": command}}],
        )
        ledger.add_tool_result(sid, f"c{i}", f"# module {i}\n" + "x = 1\n" * 10)

    for i in range(12):
        step(i)
    spans = {}
    for k in range(5):
        first, last = 3 + 4 * k, 6 + 4 * k
        text = f"Batch {k}: read modules {2 * k} and {2 * k + 1}; nothing found."
        spans[ledger.record_summary(sid, covers_from=first, covers_through=last, text=text).summary_id] = (
            first,
            last,
        )
    for i in range(12, 80):
        step(i)
    renderer = contextledger.Renderer(ledger, tokenizer="heuristic")
    context = renderer.render(sid, "clip-archive", budget=4_000)
    record = contextledger.CallRecorder(ledger).record(
        context, "clip-archive", payload=contextledger.to_openai(context)
    )
    summarized = [run for run in record.dispositions if run.disposition == "summarized" and run.summary_id]
    assert len({run.summary_id for run in summarized}) > 1
    for run in summarized:
        first, last = spans[run.summary_id]
        assert first <= run.first <= run.last <= last, run
    assert why(ledger, sid, "Reading m4.py", renderer=renderer).calls[-1].summary_id == "id-4"  # batch 11-14
