"""A worker holds each summary to what the requesting policy shows under the request's budget."""

from __future__ import annotations

import contextledger
from contextledger.application.kernel.summary_log import SummaryStream
from contextledger.projections.presets import PRESETS
from contextledger.testing import CountingIds, FixedClock, ScriptedSummarizer


def _session(ledger: contextledger.Ledger, steps: int, rule: str | None = None) -> str:
    session = ledger.start_session(system_prompt="You are a coding agent.", tools=[{"name": "bash"}])
    ledger.add_user_message(session, "Read every module of src/ and find the slow one.")
    if rule is not None:
        ledger.add_assistant_message(session, "On it.")
        ledger.add_user_message(session, rule)
    _steps(ledger, session, range(steps))
    return session


def _steps(ledger: contextledger.Ledger, session: str, numbers: range) -> None:
    for i in numbers:
        command = f"cat src/mod{i}.py && wc -l src/mod{i}.py"
        ledger.add_assistant_message(
            session,
            f"Reading src/mod{i}.py for loop {i}.",
            tool_calls=[{"id": f"c{i}", "name": "bash", "arguments": {"command": command}}],
        )
        ledger.add_tool_result(session, f"c{i}", f"# src/mod{i}.py: function f{i} took {i * 7} ms\n" * 30)


def _served(policy: contextledger.Policy | str, budget: int, **worker: object) -> tuple:
    """Plan under ``policy`` at ``budget``, serve it (extractive), go past the next compaction point."""
    ledger = contextledger.open_ledger("memory://", clock=FixedClock(), ids=CountingIds())
    session = _session(ledger, 40)
    renderer = contextledger.Renderer(ledger, tokenizer="heuristic")
    summarizer = contextledger.ExtractiveSummarizer(counter=renderer.counter)
    compactor = contextledger.Compactor(
        ledger, renderer, summarizer=summarizer.name, summarizer_config=summarizer.config_sha
    )
    assert compactor.plan(session, policy, budget=budget) is not None
    assert contextledger.SummaryWorker(ledger, renderer, summarizer, **worker).run_once() == 1
    [artifact] = SummaryStream(ledger.log, session).artifacts()
    ledger.add_user_message(session, "Which one is slow?")
    for i in range(40, 80):  # up to the next compaction point, which applies the summary if it fits
        _steps(ledger, session, range(i, i + 1))
        if renderer.render(session, policy, budget=budget).summary_id is not None:
            break
    return renderer, session, artifact


def test_at_a_small_budget_the_summary_fits_one_messages_share_and_is_shown():
    """``default`` at 2,000 tokens lets a message hold 500: the worker wrote up to 800 tokens.

    The summary, recorded ``done``, was never shown: the span dropped with nothing standing for it.
    """
    renderer, session, artifact = _served("default", 2_000)
    limits = renderer.projector("default", budget=2_000).budget
    assert artifact.tokens <= limits.message_tokens
    assert renderer.render(session, "default", budget=2_000).summary_id == artifact.summary_id


def test_a_policy_the_worker_does_not_know_still_bounds_the_summary():
    """A policy file's policy (not a preset) was unknown to the worker: its ``max_tokens`` was ignored.

    The 436-token summary was never shown. The request carries its policy now.
    """
    base = PRESETS["default"]
    small = base.model_copy(
        update={"name": "small", "summary": base.summary.model_copy(update={"max_tokens": 300})}
    )
    renderer, session, artifact = _served(small, 16_000)
    assert artifact.tokens <= 300
    assert renderer.render(session, small, budget=16_000).summary_id == artifact.summary_id


def test_a_withheld_summary_can_be_asked_for_again_by_hand():
    """After a withheld summary, a manual compaction of the same span answered "nothing to compact".

    The planner's own triggers still do not ask again (a summarizer that keeps losing the task would be
    asked forever); a user asking by hand gets a new request.
    """
    ledger = contextledger.open_ledger("memory://", clock=FixedClock(), ids=CountingIds())
    session = _session(ledger, 40, rule="Do not add dependencies to pyproject.toml.")
    renderer = contextledger.Renderer(ledger, tokenizer="heuristic")
    drops = ScriptedSummarizer(
        "## Summary\nRead src/mod0.py to src/mod39.py; f7 took 7 ms.", model_written=True
    )
    compactor = contextledger.Compactor(
        ledger, renderer, summarizer=drops.name, summarizer_config=drops.config_sha
    )
    first = compactor.plan(session, "default", budget=4_000, trigger="manual")
    assert first is not None
    contextledger.SummaryWorker(ledger, renderer, drops).run_once()
    [withheld] = SummaryStream(ledger.log, session).artifacts()
    assert withheld.withheld
    again = compactor.plan(session, "default", budget=4_000, trigger="manual")
    assert again is not None
    assert (again.covers_from, again.covers_through) == (first.covers_from, first.covers_through)
    assert again.request_id != first.request_id


def test_a_model_answer_keeping_none_of_the_spans_facts_is_never_applied():
    """A model's "I'm sorry, but I can't help with that." (finish reason ``stop``) was applied.

    The history of 40 reads was replaced by an apology. A model summary keeping none of the span's paths,
    commands and ids is a failed attempt; the context keeps what it had.
    """
    ledger = contextledger.open_ledger("memory://", clock=FixedClock(), ids=CountingIds())
    session = _session(ledger, 40)
    renderer = contextledger.Renderer(ledger, tokenizer="heuristic")
    sorry = ScriptedSummarizer("I'm sorry, but I can't help with that.", model_written=True)
    compactor = contextledger.Compactor(
        ledger, renderer, summarizer=sorry.name, summarizer_config=sorry.config_sha
    )
    assert compactor.plan(session, "default", budget=4_000, trigger="manual") is not None
    contextledger.SummaryWorker(ledger, renderer, sorry).run_once()
    assert SummaryStream(ledger.log, session).artifacts() == []
    [request] = SummaryStream(ledger.log, session).requests().values()
    assert "keeps none of the span's" in (request.last_error or "")
