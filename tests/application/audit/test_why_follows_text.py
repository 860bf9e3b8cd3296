"""`why` follows the text through each call's payload, not the first event that held it (issue 18, 1-2)."""

from __future__ import annotations

import contextledger
from contextledger.application.audit.forensics import why
from contextledger.application.render.renderer import Renderer
from contextledger.projections.presets import PRESETS

ON_ARRIVAL = PRESETS["default"].model_copy(
    update={
        "name": "default-on-arrival",
        "summary": PRESETS["default"].summary.model_copy(update={"on_arrival": True}),
    }
)
"""The default preset applying each summary as soon as it is produced."""

FACT = "ZETA-42 lives in the vault"
PADDING = "padding words " * 60


def _start(ledger):
    """A session whose first turn (kept by every preset as the task) holds nothing of interest."""
    session = ledger.start_session(system_prompt="s")
    ledger.add_user_message(session, "the task")
    for step in range(3):
        ledger.add_assistant_message(session, None, tool_calls=[{"id": f"s{step}", "name": "bash"}])
        ledger.add_tool_result(session, f"s{step}", f"step {step} output", tool_name="bash")
    ledger.add_assistant_message(session, "ready")
    return session


def _turns(ledger, session, count):
    for turn in range(count):
        ledger.add_user_message(session, f"turn {turn} {PADDING}")
        ledger.add_assistant_message(session, f"answer {turn}")


def test_a_fact_repeated_in_a_later_event_stays_in_context(ledger):
    """The first event holding the fact is dropped, but a later one keeps it in front of the model."""
    session = _start(ledger)
    first = ledger.add_user_message(session, f"remember: {FACT}")
    ledger.add_assistant_message(session, "noted")
    _turns(ledger, session, 8)
    again = ledger.add_assistant_message(session, f"As you said: {FACT}.")
    _turns(ledger, session, 1)
    renderer = Renderer(ledger, tokenizer="heuristic")
    answer = why(ledger, session, FACT, renderer=renderer, policy=PRESETS["default"], budget=1_200)
    assert answer.carried_by == (first, again)
    dropped = [f for f in answer.calls if f.position < again and f.shown is None]
    assert dropped, "the first event must leave the context before the repeat (else the test proves nothing)"
    assert answer.first_left_position == dropped[0].position
    assert answer.left_event == first
    after = [f for f in answer.calls if f.position >= again]
    assert after
    assert all(f.shown == "verbatim" and f.shown_from == (again,) for f in after)
    assert answer.back_at_call == after[0].call_id
    assert f"back in context (verbatim) from call {after[0].call_id}" in answer.verdict
    assert f"carried by events {first}, {again}" in answer.verdict


def test_a_fact_in_the_kept_head_of_a_truncated_result_is_still_in_context(ledger):
    """The blocks preset cuts outputs to 50 lines at compaction: a fact on line 3 stays in the cut message."""
    session = _start(ledger)
    ledger.add_user_message(session, "list the vault")
    ledger.add_assistant_message(session, None, tool_calls=[{"id": "c1", "name": "bash", "arguments": "{}"}])
    lines = [f"line {i} of the listing" for i in range(300)]
    lines[3] = FACT
    result = ledger.add_tool_result(session, "c1", "\n".join(lines), tool_name="bash")
    for turn in range(6):
        ledger.add_user_message(session, f"turn {turn} " + "pad " * 200)
        ledger.add_assistant_message(session, f"answer {turn}")
    renderer = Renderer(ledger, tokenizer="heuristic")
    answer = why(ledger, session, FACT, renderer=renderer, policy=PRESETS["blocks"], budget=4_000)
    assert answer.entered_at == result
    assert answer.first_left_call is None
    truncated = [f for f in answer.calls if f.disposition == "truncated"]
    assert truncated, "the result must be truncated at some call (else the test proves nothing)"
    assert all(f.shown == "truncated" for f in truncated)
    assert answer.first_left_call is None
    assert answer.verdict.startswith("still in context")
    cut = why(
        ledger, session, "line 150 of the listing", renderer=renderer, policy=PRESETS["blocks"], budget=4_000
    )
    assert cut.first_left_position == truncated[0].position
    assert cut.disposition == "truncated"
    assert cut.reducer == "truncation"


def _summarized_session(ledger):
    session = _start(ledger)
    entered = ledger.add_user_message(session, f"remember: {FACT}")
    ledger.add_assistant_message(session, "noted")
    _turns(ledger, session, 10)
    return session, entered


def test_a_fact_carried_by_the_applied_summary_is_still_in_context(ledger):
    """The event is dropped, but from that call on the summary applied holds the text: it never left."""
    session, entered = _summarized_session(ledger)
    renderer = Renderer(ledger, tokenizer="heuristic")
    before = why(ledger, session, FACT, renderer=renderer, policy=ON_ARRIVAL, budget=1_200)
    assert before.first_left_position is not None
    ledger.record_summary(
        session,
        covers_from=2,
        covers_through=entered + 1,
        text=f"The user said {FACT}.",
        produced_at=before.first_left_position,
    )
    answer = why(ledger, session, FACT, renderer=renderer, policy=ON_ARRIVAL, budget=1_200)
    assert answer.first_left_call is None
    later = [f for f in answer.calls if f.position >= before.first_left_position]
    assert later
    assert all(f.shown == "summary" for f in later)
    assert answer.first_left_call is None
    assert answer.carried_by == (entered,)


def test_summary_contains_describes_the_summary_applied_at_the_call_where_it_left(ledger):
    """A summary produced after the fact left, applied later, is named as later, not as that call's."""
    session, entered = _summarized_session(ledger)
    renderer = Renderer(ledger, tokenizer="heuristic")
    before = why(ledger, session, FACT, renderer=renderer, policy=ON_ARRIVAL, budget=1_200)
    assert before.first_left_position is not None
    produced = before.first_left_position + 3
    summary = ledger.record_summary(
        session, covers_from=2, covers_through=entered + 1, text=f"Earlier: {FACT}.", produced_at=produced
    )
    answer = why(ledger, session, FACT, renderer=renderer, policy=ON_ARRIVAL, budget=1_200)
    assert answer.first_left_position == before.first_left_position
    assert answer.summary_id is None  # no summary was applied at that call
    assert answer.summary_contains is None
    assert "mentions it" not in answer.verdict
    assert answer.later_summary_id == summary.summary_id
    applying = next(f for f in answer.calls if f.position >= produced)
    assert answer.later_summary_call == applying.call_id
    assert answer.later_summary_position == applying.position
    assert applying.summary_id == summary.summary_id
    assert all(f.summary_id is None for f in answer.calls if f.position < produced)
    assert f"summary {summary.summary_id} carries it from call {applying.call_id}" in answer.verdict


def test_a_text_cut_from_a_pinned_first_task_is_not_still_in_context(transcripts):
    """The first task is pinned, but truncation cut its middle: a text of the cut is not in the payload.

    Its fate was ``pinned`` (taken as whole), so ``why`` answered "still in context" for a line the payload
    did not hold, and for computed calls named "not-rendered" ("reasoning, say") instead of the cut.
    """
    from contextledger.adapters.importers.service import import_file  # noqa: PLC0415
    from contextledger.application.audit.call_recorder import CallRecorder  # noqa: PLC0415
    from contextledger.application.audit.forensics import why  # noqa: PLC0415
    from contextledger.application.render.renderer import Renderer  # noqa: PLC0415
    from contextledger.projections.presets import get_preset  # noqa: PLC0415

    cut = "Replace first occurrence on line 1"
    with contextledger.open_ledger("memory://") as ledger:
        [report] = import_file(
            ledger, transcripts / "mini-swe-agent__django__django-16560.traj.json"
        ).sessions
        session = report.session_id
        renderer = Renderer(ledger)
        context = renderer.render(session, "default", at=20, budget=3_000)
        task = next(m for m in context.messages if 2 in m.sources)
        assert task.kind == "truncated"
        assert cut not in task.text
        assert ledger.text(ledger.events(session, after=1, upto=2)[0].event.content).count(cut) == 1
        CallRecorder(ledger).record(context, get_preset("default"))
        recorded = why(ledger, session, cut, renderer=renderer)
        assert recorded.calls_source == "recorded"
        assert not recorded.verdict.startswith("still in context"), recorded.verdict
        assert recorded.calls[0].disposition == "truncated"


def test_a_text_only_a_summary_holds_is_named_there_not_never_held():
    """A summary's own words, in no event, are named in the summary that holds them.

    ``why`` said "the session never held it" while ``search`` found them in the artifact.
    """
    from contextledger.application.search.log_search import search_session  # noqa: PLC0415

    with contextledger.open_ledger("memory://") as ledger:
        session = ledger.start_session(system_prompt="sys")
        for i in range(4):
            ledger.add_user_message(session, f"step {i}")
            ledger.add_assistant_message(session, f"done {i}")
        artifact = ledger.record_summary(
            session,
            covers_from=2,
            covers_through=5,
            text="Steps asked; read at position 7 later.",
        )
        answer = why(ledger, session, "read at position 7", renderer=Renderer(ledger, tokenizer="heuristic"))
        assert answer.entered_at is None
        assert "never held" not in answer.verdict
        assert artifact.summary_id in answer.verdict
        assert search_session(ledger, session, "read at position 7")
        assert "never held" in why(ledger, session, "said nowhere", renderer=Renderer(ledger)).verdict
