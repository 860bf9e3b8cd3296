"""The fold-floor bench (bench/fold_floor.py) times leaner folds of a rebuild's inputs, checked."""

from __future__ import annotations

import sys
from pathlib import Path

import contextledger
import pytest
from contextledger.adapters.importers.service import import_file

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import fold_floor
from harness import child_json

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts"


def _captured(tmp_path: Path) -> tuple[Path, Path]:
    """Two sessions imported; a first rebuild, then the fold calls of a rebuild under the bench's policy."""
    db, calls = tmp_path / "ledger.db", tmp_path / "calls.pkl"
    with contextledger.open_ledger(f"sqlite:///{db}") as ledger:
        for name in ("swe-agent__swe-agent__test-repo-i1.traj", "openhands-events__basic_gui_mode.json"):
            assert import_file(ledger, FIXTURES / name).ok
    for policy in ("default", fold_floor.POLICY):
        done = child_json(
            [
                fold_floor.CAPTURE,
                "--phase",
                "capture",
                "--db",
                str(db),
                "--policy",
                policy,
                "--calls",
                str(calls),
            ]
        )
        assert done["calls"] >= 2
    return db, calls


def test_every_way_is_timed_and_the_columns_agree_with_the_fold(tmp_path):
    """Each way folds every call once a run; the columns' sums equal the fold's on the sessions compared."""
    db, calls = _captured(tmp_path)

    result = fold_floor.phase_time(db, calls, runs=2)

    assert result["compared"] >= 1
    assert result["events"] > 0
    assert set(result["times"]) == set(fold_floor.WAYS)
    assert all(len(runs) == 2 and min(runs) > 0 for runs in result["times"].values())
    assert fold_floor.table(result)[-1].startswith("| touch |")


def test_columns_that_disagree_with_the_fold_fail_the_check(tmp_path, monkeypatch):
    """A columns fold whose sum is one token off is refused, naming the session."""
    db, calls = _captured(tmp_path)
    right = fold_floor.columns
    monkeypatch.setattr(
        fold_floor,
        "columns",
        lambda events, pending: (*right(events, pending)[:2], right(events, pending)[2] + 1),
    )

    with pytest.raises(RuntimeError, match=r"columns give \d+ groups, \d+ tokens; the fold"):
        fold_floor.phase_time(db, calls, runs=1)
