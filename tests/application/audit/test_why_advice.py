"""`why`'s advice names the limit that cut (the call's policy's), and says what its computed calls lack."""

from __future__ import annotations

import contextledger
from contextledger.application.audit.call_recorder import CallRecorder
from contextledger.application.audit.forensics import why
from contextledger.application.render.renderer import Renderer
from contextledger.projections.presets import PRESETS

CUT = "line 150 of the listing"


def _listing(ledger: contextledger.Ledger) -> str:
    """A 300-line listing in the second turn, then six turns of chat: ``blocks`` cuts it to 50 lines.

    The first turn (three steps) is what ``blocks`` keeps first, so the listing is not in the kept head.
    """
    session = ledger.start_session(system_prompt="s")
    ledger.add_user_message(session, "the task")
    for step in range(3):
        ledger.add_assistant_message(session, None, tool_calls=[{"id": f"s{step}", "name": "bash"}])
        ledger.add_tool_result(session, f"s{step}", f"step {step} output", tool_name="bash")
    ledger.add_assistant_message(session, "ready")
    ledger.add_user_message(session, "list the vault")
    ledger.add_assistant_message(session, None, tool_calls=[{"id": "c1", "name": "bash", "arguments": "{}"}])
    ledger.add_tool_result(session, "c1", "\n".join(f"line {i} of the listing" for i in range(300)))
    for turn in range(6):
        ledger.add_user_message(session, f"turn {turn} " + "pad " * 200)
        ledger.add_assistant_message(session, f"answer {turn}")
    return session


def test_a_result_blocks_cut_by_lines_is_advised_by_max_lines():
    """``blocks`` cuts results to 50 lines and sets no ``max_tokens``: the advice named ``max_tokens``."""
    with contextledger.open_ledger("memory://") as ledger:
        session = _listing(ledger)
        renderer = Renderer(ledger, tokenizer="heuristic")
        blocks = PRESETS["blocks"]
        cut = why(ledger, session, CUT, renderer=renderer, policy=blocks, budget=4_000)
        assert (cut.disposition, cut.reducer) == ("truncated", "truncation"), cut.verdict
        assert "[truncation] max_lines above this output's size" in (cut.smallest_change or "")
        assert "max_tokens" not in (cut.smallest_change or "")


def test_an_agents_recorded_call_names_the_policy_field_it_sets():
    """For a call an agent loop recorded, the advice names the ``Policy`` field the call's policy set."""
    with contextledger.open_ledger("memory://") as ledger:
        session = _listing(ledger)
        renderer = Renderer(ledger, tokenizer="heuristic")
        recorder = CallRecorder(ledger)
        blocks = PRESETS["blocks"]
        context = renderer.render(session, blocks, budget=4_000)
        recorder.record(context, blocks, meta={"driver": "AgentContext"})
        cut = why(ledger, session, CUT, renderer=renderer)
        assert cut.calls_source == "recorded"
        assert "truncation.max_lines above this output's size" in (cut.smallest_change or ""), cut.verdict


def test_computed_calls_without_stored_summaries_say_so():
    """``why --policy`` computes calls with the stored summaries only (none here), unsaid.

    It said "dropped, raise the budget" where ``report`` and ``simulate``, which run a summarizer, showed
    the text summarized at the same call: the answer says now that its calls had no summary to show.
    """
    with contextledger.open_ledger("memory://") as ledger:
        session = _listing(ledger)
        renderer = Renderer(ledger, tokenizer="heuristic")
        answer = why(ledger, session, CUT, renderer=renderer, policy=PRESETS["default"], budget=4_000)
        assert answer.calls_source == "computed"
        assert answer.caveat is not None
        assert "none stored" in answer.caveat
        without = PRESETS["default"].model_copy(
            update={"summary": PRESETS["default"].summary.model_copy(update={"enabled": False})}
        )
        assert why(ledger, session, CUT, renderer=renderer, policy=without, budget=4_000).caveat is None
