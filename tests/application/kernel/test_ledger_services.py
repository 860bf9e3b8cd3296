"""Pins, forks and caller-recorded summaries are services over the ledger's port, not parts of Ledger."""

from __future__ import annotations

import contextledger
import pytest
from contextledger.application.kernel import pins
from contextledger.application.kernel.fork import fork_session
from contextledger.application.kernel.session_port import SessionLedger
from contextledger.application.kernel.summary_log import record_summary
from contextledger.domain.events import ItemPinned


def _session(ledger: contextledger.Ledger) -> str:
    session = ledger.start_session(system_prompt="sys")
    ledger.add_user_message(session, "look at a.py")
    ledger.add_assistant_message(session, tool_calls=[{"id": "c1", "name": "read", "arguments": {}}])
    ledger.add_tool_result(session, "c1", "contents of a.py")
    return session


def test_the_ledger_is_the_port_its_services_are_written_against(ledger):
    """``Ledger`` satisfies ``SessionLedger`` and its pin/fork/record_summary give what the services give."""
    port: SessionLedger = ledger
    session = _session(port)
    by_service = pins.pin(port, session, 4, "service")
    by_method = ledger.pin(session, 4, "method")
    pinned = [r.event for r in ledger.events(session) if isinstance(r.event, ItemPinned)]
    assert (by_service, by_method) == (5, 6)
    assert [p.reason for p in pinned] == ["service", "method"]
    assert pinned[0].meta == pinned[1].meta != {}  # both carry the step group (call and result)
    child = fork_session(port, session, 4)
    assert [r.position for r in ledger.events(child)] == [1, 2, 3, 4]
    artifact = record_summary(port, session, covers_from=2, covers_through=4, text="read a.py")
    assert ledger.summaries(session) == [artifact]


def test_a_pin_span_of_no_message_appends_nothing(ledger):
    """An empty build appends nothing: pinning a span of only pins returns () and the head stays."""
    session = _session(ledger)
    ledger.pin(session, 2)
    head = ledger.version(session)
    assert ledger.pin_span(session, head, head) == ()
    assert ledger.version(session) == head


def test_start_session_refuses_a_keyword_it_does_not_take(ledger):
    """A misspelt keyword is a TypeError naming it, and nothing is written (one keyword list, checked)."""
    with pytest.raises(TypeError, match="sytem_prompt"):
        ledger.start_session(session_id="s1", sytem_prompt="x")
    with pytest.raises(TypeError, match="sytem_prompt"):
        ledger.start_sessions([{"session_id": "s2", "sytem_prompt": "x"}])
    assert ledger.sessions() == []


def test_record_summary_refuses_missing_or_unknown_keywords(ledger):
    """``record_summary`` names a missing ``text`` or an unknown keyword, as a Python call would."""
    session = _session(ledger)
    with pytest.raises(TypeError, match="text"):
        ledger.record_summary(session, covers_from=2, covers_through=3)
    with pytest.raises(TypeError, match="model_name"):
        ledger.record_summary(session, covers_from=2, covers_through=3, text="t", model_name="m")
    assert ledger.summaries(session) == []


@pytest.mark.parametrize("text", ["", "   \n", "## Goal\n- [ ]\n## Decisions\n[to fill]\n(none)"])
def test_record_summary_refuses_a_summary_that_says_nothing(ledger, text):
    """An empty or skeleton-only artifact would replace history with nothing: refused, nothing written.

    The same rule the worker applies to a model's reply (``check_summary_text``), raised as bad input;
    the session and its summary stream are unchanged, and a summary with words is still taken.
    """
    session = _session(ledger)
    head = ledger.version(session)
    with pytest.raises(contextledger.InvalidMessageError, match="must say something"):
        ledger.record_summary(session, covers_from=2, covers_through=3, text=text)
    assert ledger.summaries(session) == []
    assert ledger.version(session) == head
    ledger.record_summary(session, covers_from=2, covers_through=3, text="## Goal\nread a.py")
    assert [s.covers_through for s in ledger.summaries(session)] == [3]


def test_a_span_outside_the_session_is_refused_and_nothing_is_pinned(ledger):
    """``pin_span``/``unpin_span`` past the head name the session's range; no event is written.

    A span inside the session pins its messages; one that reaches past it used to be cut short in
    silence (or pin nothing while the command said it pinned).
    """
    session = _session(ledger)
    head = ledger.version(session)
    for first, last in ((2, head + 1), (head + 1, head + 10), (500, 999)):
        with pytest.raises(contextledger.ValidationError, match=rf"outside session .* \(1\.\.{head}\)"):
            ledger.pin_span(session, first, last)
        with pytest.raises(contextledger.ValidationError, match="outside session"):
            ledger.unpin_span(session, first, last)
    assert ledger.version(session) == head
    assert ledger.pin_span(session, 2, head) != ()


@pytest.mark.parametrize("text", ["3-", "+3", " 3", "3_0", "\u0663", "-3", "3-x", "4-2", "0"])
def test_the_cli_takes_positions_in_plain_digits_only(text):
    """``pin``/``unpin`` positions are ``N`` or ``FIRST-LAST`` in ASCII digits; anything else is refused."""
    from contextledger.adapters.cli.pin_cmd import parse_span  # noqa: PLC0415

    with pytest.raises(contextledger.ValidationError):
        parse_span(text)
    assert (parse_span("3"), parse_span("3-7")) == ((3, 3), (3, 7))


def test_record_summary_refuses_to_cover_an_event_the_session_does_not_have(ledger):
    """A summary may not cover the next position (head + 1), which it cannot have seen.

    It was taken: the event appended there later rendered as summarized by a summary that never saw it,
    and ``why`` said the summary "does not mention it".
    """
    session = _session(ledger)
    head = ledger.version(session)
    with pytest.raises(contextledger.InvalidMessageError, match="events the session has"):
        ledger.record_summary(session, covers_from=2, covers_through=head + 1, text="read a.py and more")
    assert ledger.summaries(session) == []
    ledger.record_summary(session, covers_from=2, covers_through=head, text="read a.py")
    assert [s.covers_through for s in ledger.summaries(session)] == [head]


def test_an_unpin_lifts_only_a_pin_in_force_and_writes_nothing_else(ledger):
    """An unpin of a position never pinned (or of the session's start) was written for good.

    It changed nothing, and a span unpinned every message. Now each unpin lifts a pin in force, counted
    as the fold counts them.
    """
    session = ledger.start_session(system_prompt="s")
    asked = ledger.add_user_message(session, "first task")
    said = ledger.add_assistant_message(session, "ok")
    for position in (1, said):
        with pytest.raises(contextledger.InvalidMessageError, match="not pinned"):
            ledger.unpin(session, position)
    assert ledger.unpin_span(session, 1, said) == ()
    head = ledger.version(session)
    ledger.pin(session, asked)
    ledger.pin(session, asked)
    assert len(ledger.unpin_span(session, 1, said)) == 2  # pinned twice: two unpins, none for the rest
    with pytest.raises(contextledger.InvalidMessageError, match="not pinned"):
        ledger.unpin(session, asked)
    assert ledger.version(session) == head + 4
