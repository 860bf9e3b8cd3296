"""`contextledger rebuild` through the console script: build, compare, switch, drop; piped, no bar."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from contextledger.application.search.text_index import SEARCH_VIEW

CLI = str(Path(sys.executable).with_name("contextledger"))
TRAJ = (
    Path(__file__).resolve().parents[2]
    / "fixtures"
    / "transcripts"
    / "mini-swe-agent__psf__requests-1142.traj.json"
)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], capture_output=True, text=True, check=False, timeout=300)


def test_rebuild_builds_beside_the_live_version_switches_and_drops_the_old(tmp_path):
    """The first rebuild switches; a changed policy is compared with it, switched to, the old one dropped."""
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    assert _run("import", str(TRAJ), "--db", db, "--json").returncode == 0
    first = _run("rebuild", "--policy", "default", "--budget", "16000", "--switch", "--db", db, "--json")
    assert first.returncode == 0, first.stderr
    old = json.loads(first.stdout)
    assert old["switched"] is True
    assert old["live"] is None
    assert old["candidate"]["sessions"] == 1
    policy = tmp_path / "new.toml"
    policy.write_text('base = "threshold"\n')
    done = _run(
        "rebuild", "--policy", str(policy), "--switch", "--drop", old["version"], "--db", db, "--json"
    )
    assert done.returncode == 0, done.stderr
    new = json.loads(done.stdout)
    assert new["live"]["version"] == old["version"]
    assert new["candidate"]["policy"] == "new"
    assert len(new["differing"]) == 1
    assert (new["switched"], new["dropped"]) == (True, old["version"])
    refused = _run("rebuild", "--policy", str(policy), "--drop", new["version"], "--db", db, "--json")
    assert refused.returncode == 1
    assert "active" in json.loads(refused.stderr)["error"]["message"]
    piped = _run("rebuild", "--policy", "default", "--budget", "16000", "--db", db)
    assert piped.returncode == 0, piped.stderr
    assert piped.stderr == ""  # piped stderr: no bar (a terminal's shows one: test_cli_progress.py)
    assert "not switched (add --switch)" in piped.stdout


def test_render_from_projection_refuses_a_stale_config_and_names_the_rebuild(tmp_path):
    """``render --from-projection`` serves the active version's config and refuses another one, by name."""
    db = f"sqlite:///{tmp_path / 'serve.db'}"
    assert _run("import", str(TRAJ), "--db", db, "--json").returncode == 0
    session = json.loads(_run("sessions", "--db", db, "--json").stdout)["sessions"][0]["session_id"]
    refused = _run("render", session, "--from-projection", "--db", db, "--json")
    assert refused.returncode != 0
    assert "contextledger rebuild --policy default --switch" in json.loads(refused.stderr)["error"]["message"]
    built = _run("rebuild", "--policy", "default", "--switch", "--workers", "2", "--db", db, "--json")
    assert built.returncode == 0, built.stderr
    served = _run("render", session, "--from-projection", "--db", db, "--json")
    assert served.returncode == 0, served.stderr
    plain = _run("render", session, "--db", db, "--json")
    assert json.loads(served.stdout) == json.loads(plain.stdout)
    stale = _run("render", session, "--from-projection", "--budget", "9000", "--db", db, "--json")
    assert stale.returncode != 0
    error = json.loads(stale.stderr)["error"]
    assert error["type"] == "ProjectionConfigError"
    assert "contextledger rebuild --policy default --budget 9000 --switch" in error["message"]


def test_projections_lists_every_checkpoint_and_how_far_behind_it_is(tmp_path):
    """After a rebuild every view is at the head; an import later puts them behind by its events."""
    db = f"sqlite:///{tmp_path / 'views.db'}"
    assert _run("import", str(TRAJ), "--db", db, "--json").returncode == 0
    built = json.loads(_run("rebuild", "--policy", "default", "--switch", "--db", db, "--json").stdout)
    listed = json.loads(_run("projections", "--db", db, "--json").stdout)
    views = {row["view"]: row for row in listed["checkpoints"]}
    assert set(views) == {built["version"], "summaries/v1", "model_calls/v1", SEARCH_VIEW}
    assert listed["active"] == built["version"]
    assert all(row["behind"] == 0 for row in views.values())
    more = TRAJ.with_name("mini-swe-agent__pylint-dev__pylint-6528.traj.json")
    assert _run("import", str(more), "--db", db, "--json").returncode == 0
    later = json.loads(_run("projections", "--db", db, "--json").stdout)
    assert {row["behind"] for row in later["checkpoints"]} == {later["head"] - listed["head"]} != {0}
    shown = _run("projections", "--db", db)
    assert built["version"] in shown.stdout
    assert "yes" in shown.stdout


def test_render_from_projection_after_a_switch_uses_the_active_config_without_repeating_it(tmp_path):
    """After ``rebuild --policy tight.toml --switch`` it serves as is; no error suggests undoing it."""
    db = f"sqlite:///{tmp_path / 'switch.db'}"
    assert _run("import", str(TRAJ), "--db", db, "--json").returncode == 0
    session = json.loads(_run("sessions", "--db", db, "--json").stdout)["sessions"][0]["session_id"]
    tight = tmp_path / "tight.toml"
    tight.write_text('base = "threshold"\n')
    built = _run(
        "rebuild",
        "--policy",
        str(tight),
        "--budget",
        "12000",
        "--tokenizer",
        "heuristic",
        "--switch",
        "--db",
        db,
        "--json",
    )
    assert built.returncode == 0, built.stderr
    served = _run("render", session, "--from-projection", "--db", db, "--json")
    assert served.returncode == 0, served.stderr
    plain = _run(
        "render",
        session,
        "--policy",
        str(tight),
        "--budget",
        "12000",
        "--tokenizer",
        "heuristic",
        "--db",
        db,
        "--json",
    )
    assert json.loads(served.stdout) == json.loads(plain.stdout)
    other = _run("render", session, "--from-projection", "--policy", "default", "--db", db, "--json")
    assert other.returncode == 1
    message = json.loads(other.stderr)["error"]["message"]
    assert "without --policy, --budget or --tokenizer" in message
    assert message.index("to serve the active version") < message.index("rebuild --policy default")
