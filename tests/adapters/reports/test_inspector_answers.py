"""The inspector over a recorded loop: quoted arguments, contextledger's own texts, failures, marks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import contextledger
import pytest
from report_pages import open_report

from tests.application.agent.replies import messages_reply

CLI = str(Path(sys.executable).with_name("contextledger"))
TOOL = {"name": "bash", "input_schema": {"type": "object", "properties": {"cmd": {"type": "string"}}}}
BUDGET = 3_000


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], capture_output=True, text=True, check=False, timeout=600)


def _reply(turn: int, command: str) -> dict[str, Any]:
    return messages_reply(
        turn, [{"type": "tool_use", "id": f"toolu_{turn}", "name": "bash", "input": {"cmd": command}}]
    )


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[Path, dict[str, Any], str]:
    """A loop recorded at a 3,000-token budget: quoted commands, a manual compaction, a failed last call."""
    folder = tmp_path_factory.mktemp("answers")
    db = f"sqlite:///{folder / 'loop.db'}"
    with contextledger.open_ledger(db) as ledger:
        agent = contextledger.AgentContext.start(ledger, provider="anthropic", budget=BUDGET, tools=[TOOL])
        agent.add_user_message("Clean the build folder, then list what is left.")
        for turn in range(8):
            request = agent.request()
            calls = agent.record_response(request.call_id, _reply(turn, f'echo "Removed dir {turn}"\nls -la'))
            agent.record_tool_result(calls[0].id, f"Removed dir {turn}\n" + "total 0\n" * 150)
            if turn == 3:
                compact = _run("compact", agent.session_id, "--budget", str(BUDGET), "--db", db, "--json")
                assert compact.returncode == 0, compact.stderr
                assert json.loads(compact.stdout)["request"] is not None
        last = agent.request()
        agent.recorder.report_failure(agent.session_id, last.call_id, "RateLimitError: 429 Too Many Requests")
        session = agent.session_id
    path = folder / "report.html"
    done = _run("report", session, "-o", str(path), "--compare", "threshold", "--db", db, "--json")
    assert done.returncode == 0, done.stderr
    html = path.read_text(encoding="utf-8")
    data = html.split('<script type="application/json" id="report-data">')[1].split("</script>")[0]
    return path, json.loads(data), session


def test_a_recorded_report_marks_the_failed_call_and_the_planned_compaction(recorded):
    """The failed call carries its error; the call after a manual compaction request is marked.

    A failed call looked like any other, and recorded sessions never showed a compaction planned.
    """
    _, data, _ = recorded
    calls = data["calls"]
    assert data["source"] == "recorded"
    assert [c["failure"] for c in calls][-1] == "RateLimitError: 429 Too Many Requests"
    assert all(c["failure"] is None for c in calls[:-1])
    assert [c["number"] for c in calls if c["compaction"]] == [5]


def test_the_compared_policy_runs_under_the_recorded_budget(recorded):
    """Beside recorded calls, ``--compare`` computes the other policy under the budget they were made with."""
    _, data, _ = recorded
    assert {c["budget"] for c in data["calls"]} == {BUDGET}
    assert {c["budget"] for c in data["compare"]} == {BUDGET}


def test_the_session_state_card_is_session_state_not_history(recorded):
    """The card a compacted call sends is in the session-state tier, not counted as verbatim history."""
    _, data, _ = recorded
    texts = data["texts"]
    cards = [b for c in data["calls"] for b in c["blocks"] if texts[b[2]].startswith("[Session state at log")]
    assert cards
    assert {b[0] for b in cards} == {"state"}


def test_why_not_reads_call_arguments_and_contextledgers_own_texts(browser, recorded):
    r"""A quoted command is present where its call is sent; the card's own words are contextledger's.

    The page searched the arguments' JSON (``\"``), so a quoted command "left" the calls that sent it; and
    a text of a summary or the card was "never held" by the session.
    """
    path, _, _ = recorded
    opened = open_report(browser, path)
    page = opened.page
    page.fill("#why-query", 'echo "Removed dir 7')
    page.click("#why-form button")
    verdict = page.text_content("#why-result .verdict") or ""
    assert verdict.startswith("Entered at #")
    assert "Present in every call since." in verdict
    page.fill("#why-query", "kept by contextledger from the log")
    page.click("#why-form button")
    verdict = page.text_content("#why-result .verdict") or ""
    assert verdict.startswith("In no logged event: contextledger wrote it (the session-state card)")
    assert opened.errors == []
    page.close()


def test_a_budget_given_for_recorded_calls_is_said_to_shape_the_compared_side_only(recorded, tmp_path):
    """``--budget`` on a recorded session changed nothing and said nothing; now it says where it applies."""
    path, _, session = recorded
    db = f"sqlite:///{path.parent / 'loop.db'}"
    done = _run("report", session, "-o", str(tmp_path / "r.html"), "--budget", "8000", "--db", db, "--json")
    assert done.returncode == 0, done.stderr
    assert "--budget applies to --compare only" in done.stderr
    quiet = _run("report", session, "-o", str(tmp_path / "q.html"), "--db", db, "--json")
    assert quiet.stderr == ""


def test_why_not_names_a_tool_definition_as_the_sessions_not_contextledgers(browser, recorded):
    """A text only in the tool definitions is the session's: never "contextledger wrote it"."""
    path, _, _ = recorded
    opened = open_report(browser, path)
    page = opened.page
    page.fill("#why-query", "bash")
    page.check("#why-regex")
    page.fill("#why-query", "^bash$")
    page.click("#why-form button")
    verdict = page.text_content("#why-result .verdict") or ""
    assert verdict.startswith("In no logged message: it is in (the session's tool definitions)"), verdict
    page.close()
