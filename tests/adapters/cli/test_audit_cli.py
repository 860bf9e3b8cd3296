"""render --record, calls, replay-call and why through the console script."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import contextledger

CLI = str(Path(sys.executable).with_name("contextledger"))
TRAJ = "swe-agent__pydicom__pydicom-1458.traj"


def _run(*args: str) -> dict:
    done = subprocess.run([CLI, *args], capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_recorded_calls_replay_byte_for_byte_and_why_names_the_rule(tmp_path, transcripts):
    """Two recorded renders, listed by `calls`, reproduced by `replay-call`; `why` traces a dropped output."""
    db = f"sqlite:///{tmp_path / 'audit.db'}"
    common = ("--db", db, "--json")
    _run("import", str(transcripts / TRAJ), *common)
    [info] = _run("sessions", *common)["sessions"]
    session = info["session_id"]
    first = _run(
        "render", session, "--at", "10", "--budget", "4000", "--tokenizer", "heuristic", "--record", *common
    )
    second = _run(
        "render",
        session,
        "--budget",
        "4000",
        "--tokenizer",
        "heuristic",
        "--format",
        "anthropic",
        "--record",
        *common,
    )
    calls = _run("calls", session, *common)["calls"]
    assert [c["record"]["call_id"] for c in calls] == [first["call_id"], second["call_id"]]
    assert all(c["record"]["tokens"] == sum(c["record"]["tiers"].values()) for c in calls)
    for call in (first, second):
        replayed = _run("replay-call", call["call_id"], *common)
        assert replayed["verified"] is True
        assert replayed["payload"] == call["payload"]
    answer = _run(
        "why",
        session,
        "--position",
        "4",
        "--policy",
        "default",
        "--budget",
        "4000",
        "--tokenizer",
        "heuristic",
        *common,
    )
    assert answer["entered_at"] == 4
    assert answer["first_left_call"] is not None
    assert answer["rule"] in answer["verdict"]


def test_replay_of_an_unknown_call_is_a_user_error(tmp_path):
    """An id no session recorded exits 1 with a typed JSON error."""
    db = f"sqlite:///{tmp_path / 'empty.db'}"
    contextledger.open_ledger(db).close()
    done = subprocess.run(
        [CLI, "replay-call", "nope", "--db", db, "--json"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 1
    assert json.loads(done.stderr)["error"]["type"] == "ValidationError"


def test_render_json_carries_exact_dispositions_with_position_and_tokenizer(tmp_path, transcripts):
    """Render --json: every position 1..position has one fate (runs), next to the position and tokenizer."""
    db = f"sqlite:///{tmp_path / 'render.db'}"
    _run("import", str(transcripts / TRAJ), "--db", db, "--json")
    [info] = _run("sessions", "--db", db, "--json")["sessions"]
    document = _run(
        "render", info["session_id"], "--budget", "4000", "--tokenizer", "heuristic", "--db", db, "--json"
    )
    runs = document["dispositions"]
    assert runs[0]["first"] == 1
    assert runs[-1]["last"] == document["position"]
    assert all(b["first"] == a["last"] + 1 for a, b in itertools.pairwise(runs))
    assert {r["disposition"] for r in runs} <= {
        "verbatim",
        "pinned",
        "truncated",
        "stubbed",
        "summarized",
        "dropped",
        "control",
    }
    assert document["tokenizer"].startswith("heuristic")


def test_why_prints_its_verdict_and_a_table_of_fates(tmp_path, transcripts):
    """Without --json, why prints the verdict, the fix and one table row per change of fate."""
    db = f"sqlite:///{tmp_path / 'why.db'}"
    _run("import", str(transcripts / TRAJ), "--db", db, "--json")
    [info] = _run("sessions", "--db", db, "--json")["sessions"]
    args = ["why", info["session_id"], "--position", "4", "--policy", "default", "--budget", "4400"]
    done = subprocess.run(
        [CLI, *args, "--tokenizer", "heuristic", "--db", db], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "to keep it:" in done.stdout
    assert "low-water" in done.stdout or "retention" in done.stdout
    assert "fate" in done.stdout


def test_why_refuses_a_text_given_with_a_position(tmp_path):
    """A text given with ``--position`` was ignored: "still in context" for a text the log never held."""
    db = f"sqlite:///{tmp_path / 'why.db'}"
    with contextledger.open_ledger(db) as ledger:
        session = ledger.start_session(system_prompt="s")
        ledger.add_user_message(session, "read every module")
        ledger.add_assistant_message(session, "done")
    both = subprocess.run(
        [
            CLI,
            "why",
            session,
            "never held 0x5eed",
            "--position",
            "2",
            "--tokenizer",
            "heuristic",
            "--db",
            db,
            "--json",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert both.returncode == 1
    error = json.loads(both.stderr)["error"]
    assert (error["type"], "not both" in error["message"]) == ("ValidationError", True)


def test_why_prints_computed_call_names_whole():
    """``computed@270`` printed as ``computed@27`` beside ``computed@268``: cut like an id (it is none)."""
    from contextledger.adapters.cli.audit_cmd import _print_fates  # noqa: PLC0415 - the table alone
    from contextledger.application.audit.why_answer import CallFate  # noqa: PLC0415
    from rich.console import Console  # noqa: PLC0415

    fates = [
        CallFate(call_id="computed@268", position=268, disposition="kept", rule="verbatim", shown="verbatim"),
        CallFate(call_id="computed@270", position=270, disposition="dropped", rule="low-water"),
        CallFate(
            call_id="call-4f1c9a2b7d3e", position=272, disposition="kept", rule="verbatim", shown="verbatim"
        ),
        CallFate(call_id="call-4f1c9a2b8e11", position=274, disposition="dropped", rule="low-water"),
    ]
    console = Console(record=True, width=200)
    _print_fates(console, SimpleNamespace(calls=fates, calls_source="computed"))
    shown = [
        line.split("│")[1].strip() for line in console.export_text().splitlines() if line.startswith("│")
    ]
    assert shown == ["computed@268", "computed@270", "call-4f1c9a2b7", "call-4f1c9a2b8"]
