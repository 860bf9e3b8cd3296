"""The rebuild-phases diagnostic (bench/rebuild_phases.py) times a real CLI rebuild and weighs each part."""

from __future__ import annotations

import sys
from pathlib import Path

import contextledger
from contextledger.adapters.importers.service import import_file

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import rebuild_phases

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts"


def _run(seconds: dict[str, float]) -> dict[str, float]:
    keys = (
        "start-up",
        "catch-up",
        "after the catch-up",
        "exit",
        "whole",
        "tokenizer thread wall in its calls",
    )
    return {"events": 1_000.0, **dict.fromkeys(keys, 0.0), **seconds}


def _rows(kind: str, runs: list[dict[str, float]], raw_rate: float, tiktoken_s: float) -> dict[str, str]:
    lines = rebuild_phases._table(kind, runs, raw_rate, tiktoken_s)
    return {line.split(" | ")[0].strip("| "): line for line in lines}


def test_the_table_weighs_the_catch_up_and_the_fixed_costs_against_the_floors():
    """Whole and catch-up alone as shares of raw; fixed costs as whole minus catch-up; first vs tiktoken."""
    after = [_run({"whole": 2.0, "catch-up": 1.0}), _run({"whole": 4.0, "catch-up": 3.0})]
    rows = _rows("warm", after, 1_000, 1.0)
    assert rows["whole"].endswith("| 3.000 (2.000-4.000) |")
    assert rows["fixed costs (whole - catch-up)"].endswith("| 1.000 (33% of the whole) |")  # medians 3 and 2
    assert rows["whole, events/s / raw"].endswith("| 33.3% |")  # 1,000 events in 3 s against 1,000/s
    assert rows["catch-up alone, events/s / raw"].endswith("| 50.0% |")
    first = [_run({"whole": 2.6, "catch-up": 2.0, "tokenizer thread wall in its calls": 2.2})]
    rows = _rows("first rebuild", first, 1, 2.0)
    assert rows["whole / tiktoken alone"].endswith("| 1.30x |")
    assert rows["tokenizer thread's calls / tiktoken alone"].endswith("| 1.10x |")


def _ledger(tmp_path: Path) -> tuple[Path, int]:
    """A SQLite file holding one fixture transcript, and its newest notification id."""
    db = tmp_path / "ledger.db"
    with contextledger.open_ledger(f"sqlite:///{db}") as ledger:
        assert import_file(ledger, FIXTURE / "mini-swe-agent__psf__requests-1142.traj.json").ok
        return db, ledger.ports.notifications.head()


def test_a_probed_cli_rebuild_reports_every_phase_and_thread(tmp_path):
    """The probes still find what they wrap: every mark in order, the whole log folded, the threads seen."""
    db, stored = _ledger(tmp_path)
    first = rebuild_phases._run(db, tmp_path / "probe.json", ("--policy", "default", "--switch"))
    assert min(first["start-up"], first["catch-up"], first["after the catch-up"], first["exit"]) > 0
    assert first["events"] == stored > 0  # the CLI's own report, read back from its output
    assert first["tokenizer thread CPU"] > 0  # the first rebuild tokenizes every text on that thread
    assert first["writes set aside wall"] > 0  # each batch's commit
    assert first["process CPU"] >= first["main thread CPU"]


def test_the_parts_table_derives_what_each_part_leaves_and_the_budget_at_25_percent():
    """Each part's seconds and share; the row and the loop as differences; the budget, events / (0.25 raw)."""
    parts = {name: 0.0 for name, *_ in rebuild_phases.PARTS}
    parts.update(
        {
            "reads (scan + decode + notifications)": 0.5,
            "counts read ahead": 0.1,
            "a batch split by session, counted from its token rows": 0.15,
            "the rest counted, card facts per message": 0.05,
            "the policy's fold": 0.6,
            "each session's catch-up and row": 0.8,
            "render digests": 0.3,
            "release at head": 0.1,
            "a batch's fold, in all": 1.6,
            "comparison": 0.1,
        }
    )
    run = _run({"whole": 4.0, "catch-up": 2.5, "start-up": 0.4, "after the catch-up": 0.2, **parts})
    lines = rebuild_phases._parts_table([run], 1_000)  # 1,000 events at 1,000 events/s: 25 % allows 4 s
    rows = {line.split(" | ")[0].strip("| "): line for line in lines}
    assert rows["each session's row (its catch-up less the fold)"].endswith("| 0.200 | 5.0% |")
    loop = rows["the rest of each batch's fold (its loop)"]
    assert loop.endswith("| 0.200 | 5.0% |")  # 1.6 less the counts, rows, digests and release
    assert rows["the rest of the catch-up (commits handed aside, batches freed)"].endswith("| 0.300 | 7.5% |")
    assert rows["of which the raw floor's own work"].endswith("| 1.000 | 25.0% |")
    assert rows["budget at 25 % of raw (events / (0.25 x raw rate))"].endswith("| 4.000 | 100.0% |")


def test_a_rebuild_with_the_part_timers_times_every_part(tmp_path):
    """Every function ``PARTS`` names is still found and called in a rebuild after a config change."""
    db, _ = _ledger(tmp_path)
    rebuild_phases._run(db, tmp_path / "probe.json", ("--policy", "default", "--switch"))
    warm = rebuild_phases._run(db, tmp_path / "probe.json", ("--policy", "threshold"), parts=True)
    for name, *_ in rebuild_phases.PARTS:
        assert warm[name] > 0, name
    assert (
        warm["a batch's fold, in all"] >= warm["each session's catch-up and row"] >= warm["the policy's fold"]
    )
