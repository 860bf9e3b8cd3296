"""``rebuild --shard i/n``: two processes that share only the database equal a one-process rebuild.

Each process folds its share of the sessions under its shard's lease (a PostgreSQL advisory lock);
the one that finds the other finished completes the rebuild (hand-over, catch-up, comparison).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import contextledger
from contextledger.adapters.policy_files import resolve_policy
from contextledger.application.rebuild.blue_green import RebuildSpec
from contextledger.application.rebuild.rebuild import rebuild, store_views

CLI = str(Path(sys.executable).with_name("contextledger"))
SESSIONS = 12


def _fill(url: str) -> None:
    with contextledger.open_ledger(url) as ledger:
        for n in range(SESSIONS):
            session = ledger.start_session(session_id=f"s{n:02d}", system_prompt="be brief")
            for turn in range(15):
                ledger.add_user_message(session, f"question {turn} of session {n}: " + "words " * (turn * 7))
                ledger.add_assistant_message(session, f"answer {turn}: " + "more " * (n + turn))


def _state(url: str, spec: RebuildSpec) -> dict[str, dict[str, tuple[int, bytes]]]:
    """Every row of the version's views, by view name."""
    with contextledger.open_ledger(url) as ledger:
        views, reader = store_views(ledger)
        names = [view.name for view in spec.runner(ledger, reader, views).runner.views]
        return {name: views.load_rows(name, views.row_keys(name)) for name in names}


def test_two_shard_processes_equal_a_one_process_rebuild(pg_url: str) -> None:
    """Shards 1/2 and 2/2 run at once in two processes; their rows equal a one-process rebuild's."""
    _fill(pg_url)
    procs = [
        subprocess.Popen(
            [CLI, "rebuild", "--policy", "default", "--db", pg_url, "--shard", f"{i}/2", "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in (1, 2)
    ]
    outputs = [proc.communicate(timeout=600) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], [err[-2000:] for _, err in outputs]
    reports = [json.loads(out) for out, _ in outputs]
    assert [r["shard"] for r in reports] == ["1/2", "2/2"]
    assert any(r["completed"] for r in reports)
    assert all(r["pending"] == [] for r in reports if r["completed"])
    assert reports[0]["version"] == reports[1]["version"]
    assert all(r["folded"]["events"] > 0 for r in reports)  # each folded a real share

    spec = RebuildSpec(
        resolve_policy("default").model_dump_json(),
        None,
        "cl100k_base",
        audit_views=("summaries", "calls", "search"),
    )
    sharded = _state(pg_url, spec)
    assert len(sharded[reports[0]["version"]]) >= SESSIONS
    with contextledger.open_ledger(pg_url) as ledger:
        views, _ = store_views(ledger)
        for name in sharded:
            views.drop(name)
        assert all(views.row_keys(name) == [] for name in sharded)
        rebuild(ledger, spec)  # one process, no shards
    assert _state(pg_url, spec) == sharded


def test_a_lone_shard_waits_for_the_others_and_says_so(pg_url: str) -> None:
    """Shard 1/3 alone folds its share and names the shards still to run; it does not complete."""
    _fill(pg_url)
    done = subprocess.run(
        [CLI, "rebuild", "--policy", "default", "--db", pg_url, "--shard", "1/3", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["completed"] is False
    assert report["pending"] == ["2/3", "3/3"]
    bad = subprocess.run(
        [CLI, "rebuild", "--policy", "default", "--db", pg_url, "--shard", "3/2"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert bad.returncode != 0
    assert "shard" in bad.stderr
