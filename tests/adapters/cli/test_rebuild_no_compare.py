"""`rebuild --no-compare` builds and switches without comparing; dropping a version drops its digests too."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import contextledger
from contextledger.application.rebuild.render_digest import digests_of

CLI = str(Path(sys.executable).with_name("contextledger"))
TRAJ = (
    Path(__file__).resolve().parents[2]
    / "fixtures"
    / "transcripts"
    / "mini-swe-agent__psf__requests-1142.traj.json"
)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], capture_output=True, text=True, check=False, timeout=300)


def test_no_compare_builds_and_switches_and_a_dropped_version_leaves_no_digests(tmp_path):
    """--no-compare switches with null comparison fields; dropping the old version drops its digests."""
    path = tmp_path / "cli.db"
    db = f"sqlite:///{path}"
    assert _run("import", str(TRAJ), "--db", db, "--json").returncode == 0
    first = _run("rebuild", "--policy", "default", "--switch", "--no-compare", "--db", db, "--json")
    assert first.returncode == 0, first.stderr
    old = json.loads(first.stdout)
    assert (old["switched"], old["live"], old["candidate"], old["differing"]) == (True, None, None, None)
    shown = _run(
        "rebuild", "--policy", "threshold", "--switch", "--drop", old["version"], "--no-compare", "--db", db
    )
    assert shown.returncode == 0, shown.stderr
    assert "switched: the candidate is active" in shown.stdout
    assert "rendered differently" not in shown.stdout  # no comparison table
    with contextledger.open_ledger(db) as ledger:
        views = ledger.ports.projections
        assert views is not None
        assert views.row_keys(old["version"]) == []
        assert views.row_keys(digests_of(old["version"])) == []
        assert len(views.row_keys(views.active("context"))) == 1
