"""A model summary is sent the session-state card, checked against it, retried once, or withheld."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import contextledger
import pytest
from contextledger.adapters.summarizers.extractive import ExtractiveSummarizer
from contextledger.application.kernel.summary_log import SummaryStream
from contextledger.application.render.renderer import Renderer
from contextledger.application.summaries.compaction import Compactor
from contextledger.application.summaries.summary_worker import SummaryWorker
from contextledger.projections.card_fidelity import check_against_card
from contextledger.projections.card_state import CardState
from contextledger.projections.position_log import PositionLog
from contextledger.projections.presets import PRESETS
from contextledger.projections.summary_requests import summary_prompt
from contextledger.testing import CountingIds, FixedClock, ScriptedSummarizer

BUDGET = 6_000
POLICY = PRESETS["threshold"].model_copy(
    update={
        "name": "threshold-on-arrival",
        "summary": PRESETS["threshold"].summary.model_copy(update={"on_arrival": True}),
    }
)
RULE = "Do not add dependencies to pyproject.toml."
TASK = "Fix the bug in src/app.py."
KEEPS = (
    "## Session Summary (Compaction Round 1)\n### Original Task\n"
    f"{TASK}\n### Constraints\n- {RULE}\n### Pending Work\n"
    "- [x] reproduce the bug\n- [ ] write the regression test\n"
)
ONE_CALL = 64_000
"""A budget under which the span fits one summarizer call: each draft is one call (asked for by hand)."""
DROPS = KEEPS.replace(f"- {RULE}\n", "- Keep the change small.\n")
CLI = str(Path(sys.executable).with_name("contextledger"))


def _session(ledger, todos: list[dict[str, str]] | None = None) -> str:
    session = ledger.start_session(
        system_prompt="You are a coding agent.",
        tools=[{"name": "read_file", "description": "read", "parameters": {"type": "object"}}],
    )
    ledger.add_user_message(session, TASK)
    todos = todos or [
        {"content": "reproduce the bug", "status": "completed"},
        {"content": "write the regression test", "status": "pending"},
    ]
    ledger.add_assistant_message(
        session, "Planning.", tool_calls=[{"id": "t0", "name": "TodoWrite", "arguments": {"todos": todos}}]
    )
    ledger.add_tool_result(session, "t0", "Todos updated.")
    ledger.add_user_message(session, RULE)
    for i in range(40):
        ledger.add_assistant_message(
            session,
            f"Reading module {i}.",
            tool_calls=[{"id": f"c{i}", "name": "read_file", "arguments": {"path": f"src/mod{i}.py"}}],
        )
        ledger.add_tool_result(session, f"c{i}", f"def f{i}(): ...\n" * 120)
    return session


def _compacted(summarizer, url: str = "memory://", budget: int = BUDGET, **worker):
    """A session whose compaction request (covering the rule and the todo list) the worker served."""
    ledger = contextledger.open_ledger(url, clock=FixedClock(step=timedelta(0)), ids=CountingIds())
    session = _session(ledger)
    renderer = Renderer(ledger, tokenizer="heuristic")
    compactor = Compactor(
        ledger, renderer, summarizer=summarizer.name, summarizer_config=summarizer.config_sha
    )
    trigger = "threshold" if budget == BUDGET else "manual"
    request = compactor.plan(session, POLICY, budget=budget, trigger=trigger)
    assert request is not None
    assert request.covers_from <= 6 <= request.covers_through  # the rule (5) and the todo list (3) inside
    assert SummaryWorker(ledger, renderer, summarizer, **worker).run_once() == 1
    [artifact] = SummaryStream(ledger.log, session).artifacts()
    ledger.add_user_message(session, "Any progress?")  # the next compaction point applies a summary
    return ledger, session, renderer, artifact


def test_the_request_carries_the_card_with_or_without_a_live_prefix():
    """What a model summarizer is sent holds the card's instructions and latest todo, in every call.

    The request carries its policy, so a worker given none knows the window as well as one given it:
    this span (about 48,000 tokens for a 6,000-token window) is sent in calls that each fit, the live
    prefix left out (``test_summary_window.py``), and every call carries the card.
    """
    for policies in (None, {POLICY.name: POLICY}):
        fake = ScriptedSummarizer(KEEPS, model_written=True)
        _compacted(fake, policies=policies)
        assert len(fake.requests) > 1
        for request in fake.requests:
            assert request.prefix is None
            assert request.card is not None
            for said in (RULE, TASK, "[x] reproduce the bug", "[ ] write the regression test"):
                assert said in request.card
                assert said in summary_prompt(request)  # what both HTTP model summarizers send


def test_a_draft_that_drops_a_constraint_is_retried_and_the_outcome_recorded():
    """The first draft loses the user's rule: low-fidelity, retried, told what it lost; the retry holds."""
    fake = ScriptedSummarizer(DROPS, KEEPS, model_written=True)
    _, session, renderer, artifact = _compacted(fake, budget=ONE_CALL)
    first, retry = fake.requests
    assert first.lost == ()
    assert any(RULE in lost for lost in retry.lost)
    assert RULE in summary_prompt(retry).split("## Your previous draft lost these")[1]
    assert artifact.drafts == 2
    assert not artifact.withheld
    assert artifact.fidelity is not None
    assert (artifact.fidelity.constraints, artifact.fidelity.todo, artifact.fidelity.lost) == (1.0, 1.0, ())
    assert renderer.render(session, POLICY, budget=BUDGET).summary_id == artifact.summary_id
    [shown] = contextledger.summary_texts(renderer.ledger, session)
    assert (shown.status, shown.drafts) == ("current", 2)


def test_a_summarizer_that_always_drops_is_withheld_and_the_render_keeps_the_card(tmp_path):
    """Both drafts lose the rule: recorded with the report, never applied; the context still has the rule."""
    url = f"sqlite:///{tmp_path / 'card.db'}"
    fake = ScriptedSummarizer(DROPS, model_written=True)
    ledger, session, renderer, artifact = _compacted(fake, url, budget=ONE_CALL)
    assert len(fake.requests) == 2
    assert (artifact.drafts, artifact.withheld) == (2, True)
    assert artifact.fidelity is not None
    assert artifact.fidelity.constraints < 1
    assert any(RULE in lost for lost in artifact.fidelity.lost)
    context = renderer.render(session, POLICY, budget=BUDGET)
    assert context.summary_id is None
    assert all(m.kind != "summary" for m in context.messages)
    assert any(RULE in m.text for m in context.messages)  # verbatim or on the card
    [shown] = contextledger.summary_texts(ledger, session)
    assert shown.status == "withheld"
    ledger.close()
    printed = subprocess.run(
        [CLI, "summaries", session, "--text", "--db", url],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    assert "low-fidelity: not applied" in printed
    assert "retried (2 drafts)" in printed
    assert "card check: instructions" in printed
    assert RULE in printed


def test_the_extractive_summary_is_checked_but_never_retried():
    """A summarizer no model writes (extractive) gets its card check recorded, with one draft."""
    renderer_counter = Renderer(contextledger.open_ledger("memory://"), tokenizer="heuristic").counter
    _, _, _, artifact = _compacted(ExtractiveSummarizer(counter=renderer_counter))
    assert artifact.drafts == 1
    assert not artifact.withheld
    assert artifact.fidelity is not None
    assert 0 <= artifact.fidelity.constraints <= 1


@pytest.mark.parametrize(
    ("summary", "kept"),
    [
        (f"The user said: {RULE}", True),
        ("the user said: do NOT add   dependencies to pyproject.toml", True),
        ("The user said to add dependencies to pyproject.toml.", False),  # "not" lost: the rule inverted
        ("Nothing about packaging.", False),
    ],
)
def test_an_instruction_is_kept_only_with_its_words_and_its_negation(summary, kept):
    """Case and spacing aside, the rule's words (its negation included) must be in the summary."""
    card = CardState(users=PositionLog.of([(5, RULE, True)]))
    check = check_against_card(card, 2, 10, summary)
    assert (not check.low) == kept
    assert check.constraints == (1.0 if kept else 0.0)


def test_a_todo_list_is_owed_only_when_its_message_is_in_the_span():
    """The latest todo list's items are checked when the span holds it; a later list is still verbatim."""
    card = CardState(todo=(8, ("[x] reproduce the bug", "[ ] write the test", "[~] fix the parser")))
    assert check_against_card(card, 2, 10, "write the test").todo == 0.5
    assert check_against_card(card, 2, 7, "nothing").lost == ()


def test_a_done_todo_item_is_not_owed():
    """A completed item is no work left: a summary listing only the open ones kept the whole todo list.

    Done items counted as lost, so a correct "(none open)" read "latest todo 0 %" and the summary was
    withheld as low-fidelity: it never applied.
    """
    card = CardState(todo=(8, ("[x] reproduce the bug", "[ ] write the test")))
    check = check_against_card(card, 2, 10, "Pending work: write the test")
    assert (check.todo, check.lost) == (1.0, ())
    assert check_against_card(card, 2, 10, "reproduce the bug").lost == ("todo item (seq 8): write the test",)
    done = CardState(todo=(8, ("[x] reproduce the bug",)))
    assert check_against_card(done, 2, 10, "(none open)").todo == 1.0
