"""The one-command issue-22 summary (bench/issue22.py) reads the result files and judges each goal."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import issue22


def _row(section: str, what: str, median: float, ratio: str = "") -> list[object]:
    return [section, what, median, median, median, "u", ratio]


def _write(folder: Path, name: str, data: dict[str, object]) -> None:
    (folder / f"{name}.json").write_text(json.dumps(data))


def _table(text: str) -> dict[str, list[str]]:
    rows = [line.strip("|").split(" | ") for line in text.splitlines() if line.startswith("| ")]
    return {r[0].strip(): [c.strip() for c in r[1:]] for r in rows}


def _cli() -> dict[str, object]:
    """A rebuild_cli result: a first rebuild, and three rebuilds after a config change paired with raw."""
    return {
        "raw": [{"events_per_s": 100_000.0}],
        "tiktoken": [{"seconds": 2.0}],
        "before": {"first": {"seconds": 5.0}, "warm": [{"events": 10_000, "seconds": 1.0}]},
        "after": {
            "first": {"seconds": 2.4, "paired_ratios": [1.1, 1.25, 1.9]},
            "warm": [  # each run paired with the raw run just before it
                {"events": 30_000, "seconds": 1.0, "raw_ratio": 0.31},
                {"events": 20_000, "seconds": 1.0, "raw_ratio": 0.22},
                {"events": 25_000, "seconds": 1.0, "raw_ratio": 0.26},
            ],
        },
        "markdown": "R",
    }


def test_each_goal_is_judged_from_the_after_figures(tmp_path):
    """Ratios are computed from the medians of the same run, and 'met' follows the issue's thresholds."""
    scale_before = [
        _row("turn/memory", "turn at turns 1-50 (a new session)", 2.0),
        _row("turn/memory", "turn at turns 951-1,000", 3.0),
        _row("append", "raw sqlite3 executemany, 1,000 rows", 200_000.0),
        _row("append", "ledger.append_many, 1,000 messages", 60_000.0),
        _row("import", "peak RSS growth during the import (over the opened ledger)", 50.0, "1.11x the file"),
    ]
    scale_after = [
        _row("turn/memory", "turn at turns 1-50 (a new session)", 2.0),
        _row("turn/memory", "turn at turns 951-1,000", 2.4),
        _row("append", "raw sqlite3 executemany, 1,000 rows", 200_000.0),
        _row("append", "ledger.append_many, 1,000 messages", 110_000.0),
        _row("simulate", "policy default: 3,221 calls of 224 sessions", 900.0),
        _row("import", "peak RSS growth during the import (over the opened ledger)", 50.0, "2.50x the file"),
        _row(
            "import", "peak RSS growth during the import into PostgreSQL", 50.0, "1.10x the file (goal <= 2)"
        ),
    ]
    _write(
        tmp_path,
        "scale",
        {"before_ref": "abc", "before": scale_before, "after": scale_after, "markdown": "S"},
    )
    pg_rows = [
        _row("writers", "4 raw INSERT + COMMIT processes (floor)", 4000.0),
        _row("writers", "4 writer processes, one session each (before)", 1000.0),
        _row("writers", "4 writer processes, one session each (after)", 2400.0),
        _row("append", "single append @1,000 events", 0.8),
        _row("append", "single append @40,000 events", 1.2),
    ]
    _write(tmp_path, "pg_writers", {"before_ref": "abc", "rows": pg_rows, "markdown": "P"})
    _write(tmp_path, "rebuild_cli", _cli())
    table = _table(issue22.summary("abc", tmp_path))
    assert table["turn at turns 951-1,000 / 1-50, memory (<= 1.3)"] == ["1.50x", "1.20x", "met"]
    assert table["batched append / raw executemany (>= 50 %)"] == ["30.0 %", "55.0 %", "met"]
    assert table["simulate, policy default, calls/s (>= 1,000)"] == ["n/a", "900", "NOT met"]
    assert table["import peak RSS growth / file size, SQLite (<= 2)"] == ["1.11x", "2.50x", "NOT met"]
    assert table["import peak RSS growth / file size, PostgreSQL (<= 2)"] == ["n/a", "1.10x", "met"]
    assert table["PostgreSQL 4 writer processes / as many raw (>= 50 %)"] == ["25.0 %", "60.0 %", "met"]
    assert table["PostgreSQL 1 writer processes / as many raw (>= 50 %)"] == ["n/a", "n/a", "n/a"]
    assert table["PostgreSQL single append @40k / @1k events (<= 1.3)"] == ["n/a", "1.50x", "NOT met"]
    # before: its median rate over the median raw rate; after: the median of its paired ratios
    assert table["rebuild after a config change, one process / raw (>= 25 %)"] == ["10.0 %", "26.0 %", "met"]
    # before: its median run over the median tiktoken run; after: the median of its paired ratios
    assert table["first rebuild / tiktoken alone on the same texts (<= 1.3)"] == ["2.50x", "1.25x", "met"]


def test_a_missing_result_file_leaves_its_goals_out(tmp_path):
    """With no result files the summary has only its header: nothing is invented."""
    text = issue22.summary("abc", tmp_path)
    assert _table(text) == {"goal": ["before", "after", ""]}
    assert text.startswith("Before = `abc`, after = the working tree.\n\n| goal |")  # no facts to name


def test_the_summary_names_the_code_and_each_bench_machine(tmp_path):
    """The header names the code measured and, per result file, the machine facts it was saved with."""
    facts = {
        "python": "3.11.7",
        "cpus": 2,
        "cpu": "AMD EPYC",
        "memory_gib": 23.5,
        "load1": 0.6,
        "when": "2026-12-01T01:32:00Z",
        "commit": "0a49583",
    }
    _write(tmp_path, "scale", {"before_ref": "abc", "before": [], "after": [], "machine": facts})
    _write(tmp_path, "pg_writers", {"before_ref": "abc", "rows": [], "machine": {**facts, "load1": 3.2}})
    older = {"python": "3.11.7", "cpus": 2, "load1": 1.0, "when": "2026-11-30T09:58:00Z"}
    _write(tmp_path, "rebuild_cli", {**_cli(), "machine": older})
    lines = issue22.summary("abc", tmp_path).splitlines()
    assert lines[0] == "Before = `abc`, after = the working tree (`0a49583`)."
    scale = "- `scale`: AMD EPYC, 2 CPUs, 23.5 GiB, Python 3.11.7, load 0.6 at 2026-12-01T01:32:00Z"
    assert f"{scale}, code `0a49583`" in lines
    assert any(line.startswith("- `pg_writers`: AMD EPYC, 2 CPUs") and "load 3.2" in line for line in lines)
    # a file saved before the facts named the processor says so, without failing
    assert any(
        line.startswith("- `rebuild_cli`: processor not recorded, 2 CPUs, Python 3.11.7") for line in lines
    )
