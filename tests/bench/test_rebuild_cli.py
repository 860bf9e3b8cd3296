"""bench_rebuild_cli counts every raw and tiktoken run it made, the ones paired with each round too."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import bench_rebuild_cli

EVENTS = 1_000


def test_of_all_and_the_spread_cover_the_raw_runs_paired_with_each_round(monkeypatch, tmp_path, capsys):
    """Raw runs paired with a round are kept: the runs saved and the spread printed include them.

    The raw runs between rounds all read 1,000 events/s and the paired ones 4,000: a summary of the runs
    between rounds alone kept four raw runs and printed a spread of 1,000-1,000.
    """
    saved: dict[str, Any] = {}

    def phase(name: str, db: Path) -> dict[str, float]:
        if name == "tiktoken":
            return {"seconds": 1.0, "texts": 10}
        return {"events_per_s": 1_000.0, "seconds": 1.0, "events": EVENTS}

    def paired_phase(name: str, db: Path) -> dict[str, float]:
        """The raw run a round makes just before its rebuild after a config change: four times as fast."""
        found = phase(name, db)
        if name == "raw":
            found["events_per_s"] = 4_000.0
        return found

    def round_of(label: str, path: str | None, base: Path, work: Path, no_compare: bool) -> dict[str, Any]:
        with monkeypatch.context() as inside:
            inside.setattr(bench_rebuild_cli, "_phase", paired_phase)
            return original_round(label, path, base, work, no_compare)

    def cli(pythonpath: str | None, db: Path, *args: str) -> dict[str, Any]:
        return {"seconds": 2.0, "cpu_seconds": 2.0, "events": EVENTS, "differing": 0}

    original_round = bench_rebuild_cli._round
    base = tmp_path / "base.db"
    monkeypatch.setattr(bench_rebuild_cli, "build", lambda db, copies: db.write_bytes(b"") or EVENTS)
    monkeypatch.setattr(bench_rebuild_cli, "_phase", phase)
    monkeypatch.setattr(bench_rebuild_cli, "_round", round_of)
    monkeypatch.setattr(bench_rebuild_cli, "_cli", cli)
    monkeypatch.setattr(bench_rebuild_cli, "_has_no_compare", lambda path: False)
    monkeypatch.setattr(bench_rebuild_cli, "save", lambda name, data: saved.setdefault(name, data) and base)
    monkeypatch.setattr(sys, "argv", ["bench_rebuild_cli.py", "--runs", "3"])

    bench_rebuild_cli.main()

    summary = saved["rebuild_cli"]
    assert sorted(r["events_per_s"] for r in summary["raw"]) == [1_000.0] * 4 + [4_000.0] * 3
    assert len(summary["tiktoken"]) == 4 + 3
    text = capsys.readouterr().out
    assert "raw scan + decode 1,000 events/s (1,000-4,000)" in text
    assert "12.5% (12.5%-12.5%) of the raw run just before each; 50.0% of raw (of all)" in text
    assert summary["after"]["warm"][0]["raw_ratio"] == pytest.approx(500 / 4_000)
