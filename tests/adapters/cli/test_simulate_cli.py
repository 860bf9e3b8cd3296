"""`contextledger simulate` through the console script: JSON shape, CSV, table, usage and session errors."""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

CLI = str(Path(sys.executable).with_name("contextledger"))
TRAJ = "swe-agent__marshmallow-code__marshmallow-1867__fc-replace-from-source.traj"
TOTALS = {"calls", "input_tokens", "cached_tokens", "cache_hit_ratio", "effective_cost", "over_budget_calls"}


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], capture_output=True, text=True, check=False, timeout=300)


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> tuple[str, str]:
    """The marshmallow SWE-agent session imported into a fresh SQLite ledger."""
    transcripts = Path(__file__).resolve().parents[2] / "fixtures" / "transcripts"
    db = f"sqlite:///{tmp_path_factory.mktemp('simulate') / 'cli.db'}"
    assert _run("import", str(transcripts / TRAJ), "--db", db, "--json").returncode == 0
    [session] = json.loads(_run("sessions", "--db", db, "--json").stdout)["sessions"]
    return db, session["session_id"]


def test_json_has_totals_per_policy_and_the_csv_holds_the_same_calls(imported, tmp_path):
    """--json: a totals object per policy with the documented keys; --csv: one row per call, then totals."""
    db, session = imported
    path = tmp_path / "calls.csv"
    done = _run(
        "simulate", session, "--policy", "default", "--policy", "threshold", "--budget", "8000",
        "--provider", "openai", "--ttl", "1h", "--tokenizer", "heuristic", "--fact", "marshmallow",
        "--csv", str(path), "--db", db, "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    result = json.loads(done.stdout)
    assert result["provider"] == "openai"
    assert result["ttl_seconds"] == 3600
    assert set(result["totals"]) == {"default", "threshold"}
    for label, totals in result["totals"].items():
        assert TOTALS | {"summary_calls"} <= set(totals)
        calls = [c for c in result["calls"] if c["policy"] == label]
        assert totals["calls"] == len(calls) > 0
        assert totals["input_tokens"] == sum(c["input_tokens"] for c in calls)
        assert totals["cached_tokens"] == sum(c["cached_tokens"] for c in calls)
        assert totals["over_budget_calls"] == 0
        assert all(c["cached_tokens"] % 128 == 0 for c in calls)
    assert {f["fact"] for f in result["facts"]} == {"marshmallow"}
    with path.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    calls = [r for r in rows if r["row"] == "call"]
    totals_rows = {r["policy"]: r for r in rows if r["row"] == "total"}
    assert len(calls) == len(result["calls"])
    for label, row in totals_rows.items():
        mine = [r for r in calls if r["policy"] == label]
        assert int(row["input_tokens"]) == sum(int(r["input_tokens"]) for r in mine)
        assert math.isclose(float(row["cost"]), sum(float(r["cost"]) for r in mine), abs_tol=0.01 * len(mine))
        assert int(row["summary_call"]) == result["totals"][label]["summary_calls"]


def test_the_table_names_each_policy_and_the_cache_model(imported):
    """Without --json a totals table per policy, and with --calls one row per call."""
    db, _ = imported
    done = _run(
        "simulate", "--all", "--policy", "default", "--policy", "nexus", "--budget", "8000",
        "--tokenizer", "heuristic", "--calls", "--db", db,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "anthropic cache, TTL 300 s, budget 8,000" in done.stdout
    assert "effective cost" in done.stdout
    assert "cache hit ratio" in done.stdout
    assert "┃ pos ┃" in done.stdout
    assert done.stdout.count("│ nexus ") >= 3  # one row per call, each naming its policy


def test_errors_follow_the_cli_contract(imported):
    """No policy or no session: exit 1; unknown session: SessionNotFoundError; bad TTL: ConfigError."""
    db, session = imported
    assert _run("simulate", session, "--db", db, "--json").returncode == 1
    assert _run("simulate", "--policy", "default", "--db", db).returncode == 1
    missing = _run("simulate", "nope", "--policy", "default", "--db", db, "--json")
    assert missing.returncode == 1
    assert json.loads(missing.stderr)["error"]["type"] == "SessionNotFoundError"
    bad_ttl = _run("simulate", session, "--policy", "default", "--ttl", "soon", "--db", db, "--json")
    assert bad_ttl.returncode == 1
    assert json.loads(bad_ttl.stderr)["error"]["type"] == "ConfigError"
    assert (
        _run("simulate", session, "--policy", "default", "--provider", "gemini", "--db", db).returncode == 2
    )


def test_simulate_says_when_cache_figures_cannot_be_known(tmp_path):
    """On a transcript that recorded no times, the expiry figure and a note say the time is unknown."""
    db = f"sqlite:///{tmp_path / 'untimed.db'}"
    source = (
        Path(__file__).resolve().parents[2]
        / "fixtures"
        / "transcripts"
        / "openhands-events__basic_gui_mode.json"
    )
    assert _run("import", str(source), "--db", db, "--json").returncode == 0
    done = _run("simulate", "--all", "--policy", "default", "--tokenizer", "heuristic", "--db", db)
    assert done.returncode == 0, done.stderr
    assert "calls with no recorded time" in done.stdout
    assert "(unknown for" in done.stdout
    assert "cache-aware compaction cannot be known" in " ".join(done.stdout.split())
    data = json.loads(_run("simulate", "--all", "--policy", "default", "--db", db, "--json").stdout)
    totals = data["totals"]["default"]
    assert totals["untimed_calls"] == totals["calls"] > 0
