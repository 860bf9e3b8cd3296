"""The ceiling bench (bench/rebuild_ceiling.py) folds the rows a rebuild writes, checked, and weighs them."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import contextledger
import pytest
from contextledger.adapters.importers.service import import_file
from contextledger.application.rebuild.blue_green import RebuildSpec
from contextledger.application.rebuild.rebuild import rebuild
from contextledger.projections.presets import get_preset

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import rebuild_ceiling

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts"


def _ledger(db: Path) -> tuple[int, str]:
    """Two sessions imported, a first rebuild (switched to), a rebuild under the ceiling's policy."""
    url = f"sqlite:///{db}"
    with contextledger.open_ledger(url) as ledger:
        for name in ("swe-agent__swe-agent__test-repo-i1.traj", "openhands-events__basic_gui_mode.json"):
            assert import_file(ledger, FIXTURES / name).ok
        rebuild(ledger, RebuildSpec(get_preset("default").model_dump_json()), switch=True)
        later = RebuildSpec(get_preset(rebuild_ceiling.POLICY).model_dump_json())
        done = rebuild(ledger, later, compare=False)
    with sqlite3.connect(db) as conn:
        events = int(conn.execute("SELECT count(*) FROM ledger_events").fetchone()[0])
    return events, done.version


def test_the_ceiling_folds_the_very_rows_the_rebuild_wrote_and_refuses_a_row_that_differs(tmp_path):
    """Every session's row equals the stored one, byte for byte; one stored row changed fails the phase."""
    db = tmp_path / "ledger.db"
    events, version = _ledger(db)

    found = rebuild_ceiling.phase_ceiling(db)

    assert found["sessions"] == 2
    assert found["events_folded"] == events
    for step in ("reads", "folds", "writes"):
        assert 0 < found[step] < found["seconds"], step
    with sqlite3.connect(db) as conn:
        names = {row[0] for row in conn.execute("SELECT DISTINCT projection FROM ledger_projection_rows")}
        assert version + rebuild_ceiling.SCRATCH not in names  # the rows it wrote are dropped
        key = conn.execute(
            "SELECT key FROM ledger_projection_rows WHERE projection = ? ORDER BY key", (version,)
        ).fetchone()[0]
        conn.execute(
            "UPDATE ledger_projection_rows SET state = x'00' WHERE projection = ? AND key = ?", (version, key)
        )
    with pytest.raises(RuntimeError, match=r"of 2 rows folded, 1 differ"):
        rebuild_ceiling.phase_ceiling(db)


@pytest.mark.parametrize("change", ["a stored row it does not fold", "a folded row that is not stored"])
def test_the_ceiling_refuses_sessions_other_than_the_versions(tmp_path, change):
    """A row stored for a session it did not fold, or a session folded with no row stored, fails the phase."""
    db = tmp_path / "ledger.db"
    _, version = _ledger(db)
    with sqlite3.connect(db) as conn:
        if change == "a stored row it does not fold":
            conn.execute(
                "INSERT INTO ledger_projection_rows (projection, key, position, state) "
                "VALUES (?, ?, 1, x'00')",
                (version, "a-session-with-no-events"),
            )
        else:
            conn.execute(
                "DELETE FROM ledger_projection_rows WHERE projection = ? AND key = "
                "(SELECT min(key) FROM ledger_projection_rows WHERE projection = ?)",
                (version, version),
            )

    expected = "1 stored rows were not folded" if change.startswith("a stored") else "1 are not stored"
    with pytest.raises(RuntimeError, match=expected):
        rebuild_ceiling.phase_ceiling(db)


def test_the_table_gives_each_figure_its_share_of_its_rounds_raw_run():
    """A share is raw's seconds over the figure's per round, then their median; a part has no share."""
    split = {"ceiling_reads": 1.0, "ceiling_folds": 0.5, "ceiling_writes": 0.25, "sessions": 7}
    rounds = [
        {"raw": 1.0, "ceiling": 2.0, "fixed": 2.0, "cli": 5.0, "cli_compare": 6.0, **split},
        {"raw": 2.0, "ceiling": 4.0, "fixed": 4.0, "cli": 8.0, "cli_compare": 8.5, **split},
        {"raw": 1.0, "ceiling": 3.0, "fixed": 1.0, "cli": 10.0, "cli_compare": 12.0, **split},
    ]
    lines = rebuild_ceiling.table(100, rounds)
    rows = {line.split("|")[1].strip(): line for line in lines[4:]}

    assert lines[0] == (
        "100 events, 3 rounds; the ceiling's rows of 7 sessions equal to the CLI's, byte for byte"
    )
    assert rows["ceiling: the same rows with no plumbing, after its imports"].endswith(
        "| 3.000 (2.000-4.000) | 50.0% (33.3%-50.0%) |"
    )
    assert rows["- of which writes: the rows in one commit"].endswith("| 0.250 (0.250-0.250) | |")
    assert rows["ceiling + fixed costs: a CLI rebuild with no plumbing"].endswith(
        "| 4.000 (4.000-8.000) | 25.0% (25.0%-25.0%) |"
    )
    assert rows["the CLI rebuild after a config change, --no-compare"].endswith(
        "| 8.000 (5.000-10.000) | 20.0% (10.0%-25.0%) |"
    )
    # per round 1, 0 and 6 s: the median of the differences, not the difference of the medians (8 - 3 - 2 = 3)
    assert rows["- its plumbing: less the ceiling and the fixed costs"].endswith("| 1.000 (0.000-6.000) | |")
    assert rows["- the comparison's cost: with it less without"].endswith("| 1.000 (0.500-2.000) | |")
    assert rows["ceiling + fixed costs + the comparison's cost"].endswith(
        "| 6.000 (5.000-8.500) | 20.0% (16.7%-23.5%) |"
    )
    assert rows["budget at 25 % of raw (raw's seconds / 0.25)"].endswith("| 4.000 | 25.0% |")
