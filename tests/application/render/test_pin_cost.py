"""A pin says what it costs: what it brings back and which recent messages it displaces (issue 18, item 6)."""

from __future__ import annotations

import logging

import pytest
from contextledger.application.render.pin_cost import pin_cost, pin_with_cost
from contextledger.application.render.renderer import Renderer
from contextledger.domain.errors import InvalidMessageError, ValidationError
from contextledger.projections.presets import PRESETS

BUDGET = 16_000


def _session(ledger):
    """An early 10k-token result, evicted by 80 later turns."""
    session = ledger.start_session(system_prompt="s")
    ledger.add_user_message(session, "the task")
    ledger.add_assistant_message(session, None, tool_calls=[{"id": "c1", "name": "bash"}])
    rows = "\n".join(f"row {i} " + "x" * 40 for i in range(400))
    big = ledger.add_tool_result(session, "c1", rows, tool_name="bash")
    for turn in range(80):
        ledger.add_user_message(session, f"turn {turn} " + "word " * 80)
        ledger.add_assistant_message(session, f"answer {turn}")
    return session, big


def _verbatim(context):
    return {p for m in context.messages if m.kind == "message" for p in m.sources}


def test_pin_cost_names_what_a_big_pin_displaces_and_writes_nothing(ledger, caplog):
    """The cost is computed from the current state; the renders after the real pin bear it out."""
    session, big = _session(ledger)
    renderer = Renderer(ledger, tokenizer="heuristic")
    head = ledger.version(session)
    before = _verbatim(renderer.render(session, PRESETS["default"], budget=BUDGET))
    cost = pin_cost(renderer, session, big, policy=PRESETS["default"], budget=BUDGET)
    assert ledger.version(session) == head  # nothing written
    assert big not in before
    assert cost.brought_back == (big,)
    assert cost.pinned_tokens > 9_000
    assert cost.displaces
    assert set(cost.displaced) <= before
    assert f"displaces {len(cost.displaced)} message(s)" in cost.describe()
    with caplog.at_level(logging.INFO, logger="contextledger"):
        written, again = pin_with_cost(renderer, session, big, policy=PRESETS["default"], budget=BUDGET)
    assert written == (head + 1,)
    assert again == cost
    after = _verbatim(renderer.render(session, PRESETS["default"], budget=BUDGET))
    assert big in after
    assert not set(cost.displaced) & after
    assert before - set(cost.displaced) <= after
    logs = [record.structlog for record in caplog.records if hasattr(record, "structlog")]
    [warning] = [entry for entry in logs if entry["event"] == "pin_displaces_context"]
    assert warning["displaced"] == list(cost.displaced)


def test_a_pin_that_fits_displaces_nothing_and_does_not_warn(ledger, caplog):
    """A small evicted message pinned back costs its tokens and pushes nothing out."""
    session = ledger.start_session(system_prompt="s")
    first = ledger.add_user_message(session, "a short early remark")
    ledger.add_assistant_message(session, "ok")
    renderer = Renderer(ledger, tokenizer="heuristic")
    cost = pin_cost(renderer, session, first, policy=PRESETS["default"], budget=BUDGET)
    assert not cost.displaces
    assert "displaces nothing" in cost.describe()
    with caplog.at_level(logging.INFO, logger="contextledger"):
        pin_with_cost(renderer, session, first, policy=PRESETS["default"], budget=BUDGET)
    logs = [record.structlog for record in caplog.records if hasattr(record, "structlog")]
    assert not [entry for entry in logs if entry["event"] == "pin_displaces_context"]
    assert "pin_displaces_context" not in caplog.text


@pytest.mark.parametrize("span", [True, False])
def test_pin_cost_of_a_span_lists_every_pinned_message(ledger, span):
    """A span FIRST-LAST is costed as the pins ``pin_span`` writes."""
    session, big = _session(ledger)
    renderer = Renderer(ledger, tokenizer="heuristic")
    last = big + 2 if span else None
    cost = pin_cost(renderer, session, big - 1, last, policy=PRESETS["default"], budget=BUDGET)
    assert cost.positions == ((big - 1, big, big + 1, big + 2) if span else (big - 1,))


@pytest.mark.parametrize("position", [0, -3, 999, 1, "pin"])
def test_a_pin_the_ledger_refuses_is_refused_by_its_dry_run_too(ledger, position):
    """``pin --dry-run`` approved positions the pin refuses: outside the session, the start, a pin itself.

    A pin of a pin (or of the session's start) was written for good though no render could differ.
    """
    session, big = _session(ledger)
    pinned = ledger.pin(session, big)
    if position == "pin":
        position = pinned
    renderer = Renderer(ledger, tokenizer="heuristic")
    head = ledger.version(session)
    with pytest.raises(InvalidMessageError, match=rf"position {position} (is outside|holds a)"):
        pin_cost(renderer, session, position, policy="default", budget=BUDGET)
    with pytest.raises(ValidationError):
        ledger.pin(session, position)
    assert ledger.version(session) == head


def test_pin_cost_takes_a_presets_name_as_every_other_call_does(ledger):
    """``policy="default"`` ended in ``AttributeError: 'str' object has no attribute 'name'``."""
    session, big = _session(ledger)
    renderer = Renderer(ledger, tokenizer="heuristic")
    named = pin_cost(renderer, session, big, policy="default", budget=BUDGET)
    assert named == pin_cost(renderer, session, big, policy=PRESETS["default"], budget=BUDGET)


def test_a_pin_brings_back_its_whole_step_group_and_its_cost_says_so(ledger):
    """Pinning a dropped call brings its result back too: the dry run counted the pinned message alone.

    On the Claude Code fixture, ``pin --dry-run 4`` said 8,257 tokens where the pin brought back
    positions 3-5 and 12,541 tokens.
    """
    session = ledger.start_session(system_prompt="s")
    ledger.add_user_message(session, "the task")
    ledger.add_assistant_message(session, "ok")
    ledger.add_user_message(session, "read the log")
    call = ledger.add_assistant_message(
        session, "Reading it. " + "why " * 300, tool_calls=[{"id": "c1", "name": "bash"}]
    )
    result = ledger.add_tool_result(session, "c1", "log line\n" * 400, tool_name="bash")
    for turn in range(80):
        ledger.add_user_message(session, f"turn {turn} " + "word " * 250)
        ledger.add_assistant_message(session, f"answer {turn}")
    renderer = Renderer(ledger, tokenizer="heuristic")
    before = _verbatim(renderer.render(session, PRESETS["default"], budget=BUDGET))
    assert not {call, result} & before
    cost = pin_cost(renderer, session, call, policy=PRESETS["default"], budget=BUDGET)
    assert cost.brought_back == (call, result)
    ledger.pin(session, call)
    after = renderer.render(session, PRESETS["default"], budget=BUDGET)
    shown = [m for m in after.messages if m.kind == "message" and set(m.sources) & {call, result}]
    assert len(shown) == 2
    assert cost.pinned_tokens == sum(m.tokens for m in shown)
