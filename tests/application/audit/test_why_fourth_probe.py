"""`why` after a fourth probe: a textless event, the tool definitions, the card's quotes, the policy named."""

from __future__ import annotations

import contextledger
from contextledger.adapters.formats.openai import to_openai
from contextledger.application.audit.call_recorder import CallRecorder
from contextledger.application.audit.forensics import why
from contextledger.application.render.renderer import Renderer
from contextledger.projections.policy import Policy
from contextledger.projections.presets import get_preset

FILL = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore "

TOOLS = [
    {
        "name": "search_docs",
        "description": "Search the VELLUM-7 handbook by keyword.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string", "description": "words of the QUASAR index"}},
        },
    }
]


def _session() -> tuple[contextledger.Ledger, str]:
    ledger = contextledger.open_ledger("memory://")
    sid = ledger.start_session(system_prompt="s", tools=TOOLS)
    ledger.add_user_message(sid, "Task: read everything")
    ledger.pin(sid, 2)
    for n in range(6):
        ledger.add_assistant_message(
            sid, f"reading {n}", tool_calls=[{"id": f"c{n}", "name": "search_docs", "arguments": {}}]
        )
        ledger.add_tool_result(sid, f"c{n}", f"PART-{n}-MARK")
    ledger.unpin(sid, 2)
    return ledger, sid


def test_a_pin_asked_by_position_is_named_a_pin_not_a_text_contextledger_wrote():
    """``why --position`` on a pin matched every text (its query is empty): "contextledger wrote it"."""
    ledger, sid = _session()
    renderer = Renderer(ledger, tokenizer="heuristic")
    head = ledger.version(sid)
    pinned = why(ledger, sid, "", renderer=renderer, position=3)
    assert pinned.verdict.startswith("position 3 is the pin of position 2 (ItemPinned)"), pinned.verdict
    assert "ask about position 2" in pinned.verdict
    assert pinned.calls == ()
    assert pinned.entered_at is None
    unpinned = why(ledger, sid, "", renderer=renderer, position=head)
    assert unpinned.verdict.startswith(f"position {head} is the unpin of position 2"), unpinned.verdict
    assert "wrote it" not in pinned.verdict + unpinned.verdict


def test_a_text_only_the_tool_definitions_hold_is_named_there_not_never_held():
    """A tool's description and its parameters' texts are sent with every call: not "not in the log"."""
    ledger, sid = _session()
    renderer = Renderer(ledger, tokenizer="heuristic")
    for text in ("VELLUM-7", "quasar index"):
        answer = why(ledger, sid, text, renderer=renderer)
        assert answer.verdict.startswith("in the tool definitions (search_docs)"), answer.verdict
    absent = why(ledger, sid, "ZEPHYR-99", renderer=renderer)
    assert absent.verdict == "not in the log: the session never held it"


def _failing_builds() -> tuple[contextledger.Ledger, str]:
    """Forty failed builds: the card quotes each failure's first line after its result leaves the window."""
    ledger = contextledger.open_ledger("memory://")
    sid = ledger.start_session(system_prompt="s", tools=[{"name": "bash"}])
    ledger.add_user_message(sid, "Task: fix the build")
    for n in range(40):
        command = {"command": f"make target{n}"}
        ledger.add_assistant_message(
            sid, f"trying {n}", tool_calls=[{"id": f"c{n}", "name": "bash", "arguments": command}]
        )
        failure = f"Error: target{n} failed with code E{1000 + n}\n" + FILL * 30
        ledger.add_tool_result(sid, f"c{n}", failure, is_error=True)
    return ledger, sid


def test_a_text_the_card_stops_quoting_is_told_it_left_the_card_not_a_fresh_drop():
    """The card quoted a failure long after its result was dropped, then stopped: why named the old drop.

    The verdict said "dropped by guarantee ... at call computed@30", the call where the card, listing
    the newest failures, let it go; the result had been dropped at call computed@14. The advice named
    only the budget and pins, not the card's own limits.
    """
    ledger, sid = _failing_builds()
    renderer = Renderer(ledger, tokenizer="heuristic")
    answer = why(
        ledger, sid, "failed with code E1002", renderer=renderer, policy=get_preset("default"), budget=6_000
    )
    assert answer.verdict.startswith(f"left the session-state card at call {answer.first_left_call}"), (
        answer.verdict
    )
    shown = {f.call_id: f.shown for f in answer.calls}
    dropped = next(f for f in answer.calls if f.disposition == answer.disposition)
    assert "its event was dropped by guarantee" in answer.verdict
    assert (
        f"at call {dropped.call_id} (position {dropped.position}) and the card quoted it since"
        in answer.verdict
    )
    assert shown[dropped.call_id] == "card"
    assert answer.smallest_change.startswith("raise card.errors"), answer.smallest_change
    more = Policy.parse({"base": "default", "card": {"errors": 40}})
    kept = why(ledger, sid, "failed with code E1002", renderer=renderer, policy=more, budget=6_000)
    assert kept.first_left_position is None or kept.first_left_position > answer.first_left_position, (
        kept.verdict
    )


def test_the_answer_names_the_policy_of_the_call_the_text_left_in_not_the_latest_calls():
    """``--json``'s ``policy`` was the latest recorded call's, though the text left under an earlier one."""
    ledger, sid = _failing_builds()
    renderer = Renderer(ledger, tokenizer="heuristic")
    recorder = CallRecorder(ledger)
    tight = Policy.parse({"base": "default", "name": "tight-window"})
    for at in range(4, ledger.version(sid) + 1, 2):
        policy = tight if at <= 60 else get_preset("threshold")
        context = renderer.render(sid, policy, at=at, budget=6_000)
        recorder.record(context, policy, payload=to_openai(context), call_id=f"c{at}")
    answer = why(ledger, sid, "failed with code E1002", renderer=renderer)
    assert answer.calls_source == "recorded"
    assert answer.first_left_position is not None
    assert answer.first_left_position <= 60
    assert answer.policy == "tight-window"
    assert {f.policy for f in answer.calls} == {"tight-window", "threshold"}
