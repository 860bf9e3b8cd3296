"""Failed model calls in ``calls``: a status column and, in --json, ``status`` and ``error`` (issue 20)."""

from __future__ import annotations

import json

import contextledger

REPLY = {"model": "m", "choices": [{"message": {"role": "assistant", "content": "done"}}]}


def test_calls_lists_a_failed_call_with_its_error_beside_the_ok_one(tmp_path, run_cli):
    """A call marked failed by ``record_failure`` shows ``failed`` and the error; the retried one ``ok``."""
    url = f"sqlite:///{tmp_path / 'calls.db'}"
    with contextledger.open_ledger(url) as ledger:
        agent = contextledger.AgentContext.start(ledger, provider="openai", system_prompt="be brief")
        agent.add_user_message("go")
        failed = agent.request().call_id
        agent.record_failure(failed, TimeoutError("the model took too long"))
        retried = agent.request().call_id
        agent.record_response(retried, REPLY)
        session = agent.session_id
    code, out, err = run_cli("calls", session, "--db", url, "--json")
    assert code == 0, err
    calls = {c["record"]["call_id"]: c for c in json.loads(out)["calls"]}
    assert (calls[failed]["status"], calls[failed]["error"]) == (
        "failed",
        "TimeoutError: the model took too long",
    )
    assert (calls[retried]["status"], calls[retried]["error"]) == ("ok", None)
    assert calls[failed]["failure"]["error"] == "TimeoutError: the model took too long"
    code, out, err = run_cli("calls", session, "--db", url)
    assert code == 0, err
    flat = " ".join(out.split())
    assert "│ failed │" in flat
    assert "│ ok " in flat
    assert "2 calls, 1 failed" in flat
    assert f"call {failed[:13]} failed: TimeoutError: the model took too long" in flat
