"""`why` after a fourth probe: an event with no text asked by position, and text in the tool definitions."""

from __future__ import annotations

import contextledger
from contextledger.application.audit.forensics import why
from contextledger.application.render.renderer import Renderer

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
