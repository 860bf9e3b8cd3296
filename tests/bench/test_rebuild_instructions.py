"""The instruction-count bench (bench/rebuild_instructions.py) reads callgrind's totals and weighs them."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import rebuild_instructions


def test_the_totals_line_of_a_callgrind_file_is_read(tmp_path):
    """The count is the ``totals:`` (or ``summary:``) line's; a file cut short is refused, not read as 0."""
    out = tmp_path / "callgrind.out"
    out.write_text(
        "version: 1\ncreator: callgrind-3.19.0\nevents: Ir\nfl=a.c\nfn=f\n3 12\ntotals: 5690968684\n"
    )
    assert rebuild_instructions.totals(out) == 5_690_968_684
    out.write_text("events: Ir\nsummary: 42\n")
    assert rebuild_instructions.totals(out) == 42
    out.write_text("events: Ir\nfl=a.c\n")
    with pytest.raises(ValueError, match="no totals line"):
        rebuild_instructions.totals(out)


def test_the_table_gives_each_rebuild_its_share_of_raw_and_the_ratio_of_two_codes():
    """Raw over the rebuild's count, whole and beyond start-up, per event; after / before for each kind."""
    codes = {
        "before": {"start-up": 100, "rebuild after a config change": 500, "the same, --no-compare": 400},
        "after": {"start-up": 100, "rebuild after a config change": 400, "the same, --no-compare": 300},
    }
    rows = {
        tuple(cell.strip() for cell in line.split("|")[1:3]): line
        for line in rebuild_instructions.table(10, 100, codes)
    }
    assert rows[("raw scan + decode (floor)", "")].endswith("| 100 | 10 | 100.0% |")
    assert rows[("rebuild after a config change", "before")].endswith("| 500 | 50 | 20.0% |")
    assert rows[("rebuild after a config change", "after")].endswith("| 400 | 40 | 25.0% |")
    assert rows[("the same, --no-compare", "after")].endswith("| 300 | 30 | 33.3% |")
    assert rows[("rebuild after a config change: after / before", "")].startswith(
        "| rebuild after a config change: after / before | | 0.800 |"
    )
    beyond = [
        line for line in rebuild_instructions.table(10, 100, {"after": codes["after"]}) if "beyond" in line
    ]
    assert beyond == [
        "| … beyond start-up | after | 300 | 30 | 33.3% |",
        "| … beyond start-up | after | 200 | 20 | 50.0% |",
    ]


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_a_real_callgrind_run_counts_more_for_more_work(tmp_path):
    """Counted under valgrind for real: a loop of a million steps costs more than an empty interpreter."""
    env = {"PATH": "/usr/bin:/bin"}
    idle = rebuild_instructions.counted([sys.executable, "-c", "pass"], tmp_path, env)
    busy = rebuild_instructions.counted(
        [sys.executable, "-c", "sum(i * i for i in range(1_000_000))"], tmp_path, env
    )
    assert idle > 1_000_000  # an interpreter's start-up alone runs millions
    assert busy - idle > 10_000_000  # a million generator steps, a multiply and an add each
