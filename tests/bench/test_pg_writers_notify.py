"""bench_pg_writers.py --notify-interval: the ledger's writers again, that NOTIFY interval in their URL."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from contextledger.adapters.store.postgres_options import connection_settings

from tests.conftest import require_postgres

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import bench_pg_writers


def test_the_writers_open_the_ledger_with_the_interval_given(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each writer's URL carries ``notify_interval``, which the PostgreSQL options read as given."""
    require_postgres()
    started: list[tuple[Any, ...]] = []

    def parallel(target: Any, args: list[tuple[Any, ...]]) -> dict[str, float]:
        started.extend(args)
        return {"rate": 1.0, "client": 0.0, "server": 0.0}

    monkeypatch.setattr(bench_pg_writers, "_parallel", parallel)
    bench_pg_writers.one_writers("ours", 2, 5, notify=0.25)
    bench_pg_writers.one_writers("ours", 1, 5)
    urls = [args[0] for args in started]
    assert [connection_settings(url)[2].notify_interval for url in urls] == [0.25, 0.25, 0.05]
    assert len({args[1] for args in started}) == len(started)  # one session per writer


def test_a_round_reports_the_writers_at_each_interval_next_to_the_floor() -> None:
    """A real round (1 writer, 5 appends): a rate and a CPU row for the interval, beside raw and after."""
    require_postgres()
    rows = bench_pg_writers.run_writers([1], 5, 1, None, notify=[0.5])
    found = {row[1]: row for row in rows}
    label = "1 writer processes, one session each (after, notify_interval=0.5 s)"
    assert found[label][2] > 0
    assert found[label][6].endswith("of floor (goal >= 50 %)")
    assert any(name.endswith("(after, notify_interval=0.5 s)") and "CPU per append" in name for name in found)
    assert "1 writer processes, one session each (after)" in found


def test_raw_before_and_after_take_turns_at_going_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rounds run raw, before, after; then before, after, raw; then after, raw, before: fair to each."""
    ran: list[str] = []

    def child(args: list[str], pythonpath: str | None = None) -> dict[str, float]:
        ran.append("raw" if args[1] == "raw" else "before" if pythonpath else "after")
        return {"rate": 1.0, "client": 1e-4, "server": 1e-4}

    monkeypatch.setattr(bench_pg_writers, "_child", child)
    rows = bench_pg_writers.run_writers([4], 5, 3, "/nowhere")
    assert ran == ["raw", "before", "after", "before", "after", "raw", "after", "raw", "before"]
    assert {row[1] for row in rows} >= {
        "4 raw INSERT + COMMIT processes (floor)",
        "4 writer processes, one session each (before)",
        "4 writer processes, one session each (after)",
    }
