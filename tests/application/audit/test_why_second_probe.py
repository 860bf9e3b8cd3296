"""`why` after a second probe of its answers: arguments without the card, the default policy, cut messages."""

from __future__ import annotations

import contextledger
from contextledger.application.audit.call_recorder import CallRecorder
from contextledger.application.audit.forensics import why
from contextledger.application.audit.why_answer import reducer_of
from contextledger.application.render.renderer import Renderer
from contextledger.projections.card_config import CardConfig
from contextledger.projections.presets import PRESETS

NO_CARD = PRESETS["default"].model_copy(update={"name": "no-card", "card": CardConfig(enabled=False)})
QUOTED = 'grep -n "needle'


def _session(ledger: contextledger.Ledger) -> str:
    """A first task whose first call's arguments hold a quote, a line break and non-ASCII text."""
    session = ledger.start_session(system_prompt="s")
    ledger.add_user_message(session, "find the needle")
    command = 'grep -n "needle" src/\nsecond-line ünïcödé'
    ledger.add_assistant_message(
        session, None, tool_calls=[{"id": "c0", "name": "bash", "arguments": {"cmd": command}}]
    )
    ledger.add_tool_result(session, "c0", "src/a.py:1: needle")
    for turn in range(6):
        ledger.add_assistant_message(session, None, tool_calls=[{"id": f"c{turn + 1}", "name": "bash"}])
        ledger.add_tool_result(session, f"c{turn + 1}", f"out {turn} " * 40)
    return session


def test_quoted_arguments_are_sent_with_the_card_off():
    """With the card off, a text of a call's unescaped arguments is found in the calls that send it.

    ``_sent`` searched the arguments' JSON only, so the text read as "not-sent" at the first call, and the
    calls recorded for it were never searched.
    """
    with contextledger.open_ledger("memory://") as ledger:
        session = _session(ledger)
        renderer = Renderer(ledger, tokenizer="heuristic")
        recorder = CallRecorder(ledger)
        for at in (4, 8, 12, 15):
            recorder.record(renderer.render(session, NO_CARD, at=at), NO_CARD)
        for text in (QUOTED, "second-line ünïcödé"):
            answer = why(ledger, session, text, renderer=renderer)
            assert answer.calls_source == "recorded"
            assert answer.verdict.startswith("still in context"), (text, answer.verdict)


def test_calls_computed_without_a_policy_are_the_default_presets():
    """``why --budget`` alone computes the calls of the ``default`` preset, as the CLI and report say.

    It computed them under a bare ``Policy()`` named "custom", whose calls differed from the report's.
    """
    with contextledger.open_ledger("memory://") as ledger:
        session = _session(ledger)
        answer = why(ledger, session, QUOTED, renderer=Renderer(ledger, tokenizer="heuristic"), budget=8_000)
        assert (answer.calls_source, answer.policy) == ("computed", "default")


def test_a_message_cut_to_its_share_is_named_by_the_per_message_cap():
    """The cap rule belongs to the per-message cap, and the advice is the cap, never "dropped to fit"."""
    assert reducer_of("cap").startswith("per-message cap")
    with contextledger.open_ledger("memory://") as ledger:
        session = ledger.start_session(system_prompt="s")
        ledger.add_user_message(session, "first task")
        ledger.add_assistant_message(session, "ok")
        tail = "MIDDLE-MARKER-77"
        ledger.add_user_message(session, "words " * 1_500 + tail + " more" * 1_500)
        ledger.add_assistant_message(session, "ok")
        renderer = Renderer(ledger, tokenizer="heuristic")
        context = renderer.render(session, "default", budget=4_000)
        assert tail not in "".join(m.text for m in context.messages)
        CallRecorder(ledger).record(context, "default")
        answer = why(ledger, session, tail, renderer=renderer)
        assert answer.disposition == "truncated", answer.verdict
        assert "dropped to fit" not in (answer.smallest_change or "")
        assert "message_cap" in (answer.smallest_change or "")


def test_a_text_contextledger_wrote_into_a_payload_is_named_not_never_held():
    """The card's and a summary header's words are in payloads though no event holds them: say who wrote them.

    ``why`` answered "the session never held it" where the report's "Why not?" said contextledger wrote it.
    """
    with contextledger.open_ledger("memory://") as ledger:
        session = _session(ledger)
        renderer = Renderer(ledger, tokenizer="heuristic")
        recorder = CallRecorder(ledger)
        for at in (8, 12, 15):
            recorder.record(renderer.render(session, "default", at=at, budget=600), "default")
        card = why(ledger, session, "kept by contextledger from the log", renderer=renderer)
        assert card.verdict.startswith("in no logged event: contextledger wrote it (the session-state card)")
        assert card.entered_at is None
        assert why(ledger, session, "said nowhere 0x5eed", renderer=renderer).verdict == (
            "not in the log: the session never held it"
        )
