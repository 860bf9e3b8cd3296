"""``simulate`` and ``why`` number a session's calls alike: by the log position ``show`` prints."""

from __future__ import annotations

import json

FACT = "The `reproduce_bug.py` script has been u"
"""An assistant line of the pydicom session (position 8) that a default 8k render drops at position 11."""
TRAJ = "swe-agent__pydicom__pydicom-1458.traj"


def test_simulate_and_why_name_the_same_call_by_the_same_position(tmp_path, transcripts, run_cli):
    """Same session, policy, budget and fact: both say where it entered and the call it left by one number."""
    db = f"sqlite:///{tmp_path / 'numbers.db'}"
    common = ("--db", db, "--json")
    assert run_cli("import", str(transcripts / TRAJ), *common)[0] == 0
    session = json.loads(run_cli("sessions", *common)[1])["sessions"][0]["session_id"]
    options = ("--policy", "default", "--budget", "8000", "--tokenizer", "heuristic")
    code, out, err = run_cli("simulate", session, *options, "--fact", FACT, *common)
    assert code == 0, err
    simulated = json.loads(out)
    code, out, err = run_cli("why", session, FACT, *options, *common)
    assert code == 0, err
    answer = json.loads(out)
    [fate] = simulated["facts"]
    shown = json.loads(run_cli("show", session, *common)[1])["events"]
    entered = next(e["position"] for e in shown if FACT in json.dumps(e["event"]))
    assert fate["entered_at"] == answer["entered_at"] == entered
    assert fate["first_left_position"] == answer["first_left_position"] == 11
    why_calls = {c["position"] for c in answer["calls"]}
    simulated_calls = {c["position"] for c in simulated["calls"] if c["position"] >= entered}
    assert why_calls == simulated_calls  # one render before each assistant message, numbered alike
    assert all(shown[c["position"]]["event"]["type"] == "AssistantMessageAdded" for c in answer["calls"])
    code, printed, _ = run_cli("simulate", session, *options, "--fact", FACT, "--db", db)
    assert code == 0
    assert "left at position 11 " in " ".join(printed.split())
    code, printed, _ = run_cli("why", session, FACT, *options, "--db", db)
    assert code == 0
    assert "(position 11;" in printed
