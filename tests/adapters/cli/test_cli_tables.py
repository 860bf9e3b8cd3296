"""Human tables fold what a user copies back (ids, figures) when the terminal is narrow: never cut."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CLI = str(Path(sys.executable).with_name("contextledger"))


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "80"}
    return subprocess.run([CLI, *args], capture_output=True, text=True, check=False, env=env, timeout=300)


def test_the_import_table_folds_the_ids_it_announces_never_cuts_them(tmp_path, transcripts):
    """At 80 columns five tau-bench sessions all printed as ``tau-ben…``: no id to copy back."""
    runs = json.loads((transcripts / "tau-bench__gpt-4o-airline.json").read_text())[:5]
    source = tmp_path / "tau5.json"
    source.write_text(json.dumps(runs))
    db = f"sqlite:///{tmp_path / 'l.db'}"
    done = _run("import", str(source), "--db", db)
    assert done.returncode == 0, done.stderr
    assert "…" not in done.stdout
    cells = [line.split("│")[1].strip() for line in done.stdout.splitlines() if line.startswith("│")]
    listed = json.loads(_run("sessions", "--db", db, "--json").stdout)["sessions"]
    assert len(listed) == len(runs)
    assert "".join(cells) == "".join(s["session_id"] for s in listed)
