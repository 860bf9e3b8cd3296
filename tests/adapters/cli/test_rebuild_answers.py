"""`contextledger rebuild` says what is true: the live version, failures, drops, evictions, tokenizers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import contextledger

CLI = str(Path(sys.executable).with_name("contextledger"))
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "transcripts"
TRAJ = FIXTURES / "mini-swe-agent__psf__requests-1142.traj.json"
PYLINT = FIXTURES / "mini-swe-agent__pylint-dev__pylint-6528.traj.json"
EVICTING = ("stubbed", "truncated", "summarized", "dropped")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], capture_output=True, text=True, check=False, timeout=300)


def _ledger(tmp_path: Path, *files: Path) -> str:
    db = f"sqlite:///{tmp_path / 'answers.db'}"
    for file in files:
        assert _run("import", str(file), "--db", db, "--json").returncode == 0
    return db


def _json(*args: str) -> dict:
    done = _run(*args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_rebuilding_the_active_version_names_it_live_and_active(tmp_path):
    """The version that serves, rebuilt, is the live one: not "(none)", not "not switched"."""
    db = _ledger(tmp_path, TRAJ)
    first = _json("rebuild", "--policy", "default", "--budget", "16000", "--switch", "--db", db)
    again = _json("rebuild", "--policy", "default", "--budget", "16000", "--db", db)
    assert again["version"] == first["version"]
    assert again["live"] == again["candidate"]
    assert again["live"]["version"] == first["version"]
    assert (again["switched"], again["active"], again["differing"]) == (False, True, [])
    human = _run("rebuild", "--policy", "default", "--budget", "16000", "--db", db)
    assert "already active" in human.stdout
    assert "not switched" not in human.stdout
    assert "(none)" not in human.stdout
    other = _json("rebuild", "--policy", "threshold", "--budget", "16000", "--db", db)
    assert (other["switched"], other["active"]) == (False, False)


def test_a_switch_to_a_version_under_which_sessions_cannot_render_is_refused(tmp_path):
    """``--budget 10 --switch`` builds the version but leaves the live one serving, and says which failed.

    It was switched to (exit 0, "switched"), after which every ``render --from-projection`` failed; the
    failed sessions were not shown at all. With --no-compare the switch checks the sessions too.
    """
    db = _ledger(tmp_path, TRAJ)
    live = _json("rebuild", "--policy", "default", "--budget", "16000", "--switch", "--db", db)
    for extra in ((), ("--no-compare",)):
        refused = _run("rebuild", "--policy", "default", "--budget", "10", "--switch", *extra, "--db", db)
        assert refused.returncode == 1, refused.stdout
        assert "cannot render" in refused.stderr
        assert "not switched" in refused.stderr
        assert _json("projections", "--db", db)["active"] == live["version"]
    shown = _run("rebuild", "--policy", "default", "--budget", "10", "--db", db)
    assert shown.returncode == 0, shown.stderr
    assert "cannot render mini-swe-agent" in shown.stdout  # each failed session with its reason
    assert "budget allows 10" in shown.stdout
    assert _json("rebuild", "--policy", "default", "--budget", "10", "--db", db)["candidate"]["failed"]


def test_the_table_says_how_many_more_sessions_cannot_render_than_it_lists(tmp_path):
    """Seven sessions failed; the table said "cannot render: 7" and listed five, with no word of the rest."""
    db = _ledger(
        tmp_path,
        *sorted(FIXTURES.glob("mini-swe-agent__*.traj.json")),
        *sorted(FIXTURES.glob("swe-agent__*.traj")),
    )
    failed = _json("rebuild", "--policy", "default", "--budget", "10", "--db", db)["candidate"]["failed"]
    assert len(failed) > 5
    shown = _run("rebuild", "--policy", "default", "--budget", "10", "--db", db)
    assert sum(line.startswith("cannot render ") for line in shown.stdout.splitlines()) == 5
    assert (
        f"... and {len(failed) - 5} more session(s) that cannot render (--json lists them all)"
        in shown.stdout
    )


def test_a_drop_happens_once_and_never_to_the_version_being_built(tmp_path):
    """A second drop of one version is refused as a typo is; so is a drop of the rebuild's own version."""
    db = _ledger(tmp_path, TRAJ)
    old = _json("rebuild", "--policy", "threshold", "--budget", "16000", "--db", db)
    _json("rebuild", "--policy", "default", "--budget", "16000", "--switch", "--db", db)
    human = _run(
        "rebuild",
        "--policy",
        "blocks",
        "--budget",
        "16000",
        "--no-compare",
        "--drop",
        old["version"],
        "--db",
        db,
    )
    assert human.returncode == 0, human.stderr
    assert f"dropped {old['version']}" in human.stdout
    again = _run("rebuild", "--policy", "blocks", "--budget", "16000", "--drop", old["version"], "--db", db)
    assert again.returncode == 1
    assert "nothing to drop" in again.stderr
    blocks = _json("rebuild", "--policy", "blocks", "--budget", "16000", "--no-compare", "--db", db)
    own = _run("rebuild", "--policy", "blocks", "--budget", "16000", "--drop", blocks["version"], "--db", db)
    assert own.returncode == 1
    assert "this rebuild builds" in own.stderr
    assert blocks["version"] in {c["view"] for c in _json("projections", "--db", db)["checkpoints"]}


def test_a_live_version_behind_the_head_is_said_to_be(tmp_path):
    """Events appended after the live version's last catch-up: the comparison says how far behind it is."""
    db = _ledger(tmp_path, TRAJ)
    _json("rebuild", "--policy", "default", "--budget", "16000", "--switch", "--db", db)
    [session] = [s["session_id"] for s in _json("sessions", "--db", db)["sessions"]]
    with contextledger.open_ledger(db) as ledger:
        ledger.add_user_message(session, "One more thing: keep the changelog short.")
    new = _json("rebuild", "--policy", "clip-archive", "--budget", "16000", "--db", db)
    assert new["live_behind"] >= 1
    human = _run("rebuild", "--policy", "threshold", "--budget", "16000", "--db", db)
    assert "behind this one" in human.stdout


def test_evictions_count_each_event_once_as_the_render_disposes_of_it(tmp_path):
    """Evicted events by rule equal the render's dispositions, never more than the session's events.

    The pylint session (196 events) read "evicted by low-water 279": a step group whose late result
    spans a dropped run was counted with every group inside it, and a stubbed group's verbatim call too.
    """
    db = _ledger(tmp_path, PYLINT)
    [info] = _json("sessions", "--db", db)["sessions"]
    built = _json("rebuild", "--policy", "default", "--budget", "16000", "--db", db)
    rendered = _json("render", info["session_id"], "--policy", "default", "--budget", "16000", "--db", db)
    expected: dict[str, int] = {}
    for run in rendered["dispositions"]:
        if run["disposition"] in EVICTING and run["rule"] != "not-rendered":
            expected[run["rule"]] = expected.get(run["rule"], 0) + run["last"] - run["first"] + 1
    assert built["candidate"]["evictions"] == expected
    assert 0 < sum(expected.values()) < info["events"]


def test_a_tokenizer_change_leaves_sessions_sent_as_logged_alike(tmp_path):
    """Sessions whose render shows the log as it is send the same messages under any tokenizer."""
    db = _ledger(tmp_path, TRAJ)
    _json("rebuild", "--policy", "threshold", "--budget", "1000000", "--switch", "--db", db)
    other = _json(
        "rebuild", "--policy", "threshold", "--budget", "1000000", "--tokenizer", "heuristic", "--db", db
    )
    assert other["candidate"]["evictions"] == {}
    assert other["differing"] == []


def test_a_shard_that_completes_the_active_version_says_so(tmp_path):
    """``--shard 1/1`` over the version that serves: "already active", and the JSON's outcome keys."""
    db = _ledger(tmp_path, TRAJ)
    live = _json("rebuild", "--policy", "default", "--budget", "16000", "--switch", "--db", db)
    shard = _json("rebuild", "--policy", "default", "--budget", "16000", "--shard", "1/1", "--db", db)
    assert shard["version"] == live["version"]
    assert (shard["active"], shard["dropped"], shard["live_behind"]) == (True, None, 0)
    human = _run("rebuild", "--policy", "default", "--budget", "16000", "--shard", "1/1", "--db", db)
    assert "already active" in human.stdout
    assert "not switched" not in human.stdout
    refused = _run(
        "rebuild", "--policy", "default", "--budget", "10", "--shard", "1/1", "--switch", "--db", db
    )
    assert refused.returncode == 1
    assert "cannot render" in refused.stderr
    assert _json("projections", "--db", db)["active"] == live["version"]
