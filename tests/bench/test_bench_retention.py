"""A small run of the retention benchmark (bench/bench_retention.py): every figure produced, coherent."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import bench_retention


def test_a_small_retention_run_reports_every_figure():
    """One short session, two presets, one budget: rows for every mode and peer; the card keeps the rules."""
    result = bench_retention.run(1, 40, [16_000], ["default", "clip-archive"])
    rows = {(r["policy"], r["mode"]): r for r in result["rows"]}
    assert set(rows) >= {
        ("default", "today"),
        ("default", "card"),
        ("default", "tail"),
        ("clip-archive", "card"),
        ("unmanaged", "peer"),
    }
    assert result["tool_token_share"] >= 0.8
    for (policy, mode), row in rows.items():
        if mode != "peer":
            assert row["over_budget"] == 0, policy
            assert row["orphans"] == 0, policy
        if mode == "card":
            kept, total = row["constraints_last"].split("/")
            assert kept == total, policy
            assert all(row[f"R_rec_{kind}"] == 1.0 for kind in bench_retention.KINDS), policy
    assert "| budget | policy |" in bench_retention.table(result)
