"""The fold-floor bench (bench/fold_floor.py) times leaner folds of a rebuild's inputs, checked."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import contextledger
import pytest
from contextledger.adapters.importers.service import import_file
from contextledger.domain.content import InlineText, MediaPart
from contextledger.domain.events import UserMessageAdded
from contextledger.projections.fold import Projector
from contextledger.projections.policy import Policy

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "projections"))

import fold_floor
from harness import child_json
from projection_helpers import Builder, Words

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


def test_columns_sum_a_session_as_the_fold_does_with_a_call_left_waiting_and_an_image():
    """Groups and tokens equal the fold's: calls and their wire texts, a placeholder per call, media."""
    builder = Builder()
    image = MediaPart(
        kind="image", source="url", data=InlineText("https://x/cat.png"), sha256="c", width=64, height=64
    )
    builder._add(UserMessageAdded(content=InlineText("look at this"), media=(image,)))
    builder.step(10, 20)
    builder.user(4)
    builder.step(7, answer=False)  # its call still waits: the window shows a placeholder result
    events = builder.counted(Words())
    policy = Policy.parse(
        {"budget": {"total": 100_000}, "retention": {"enabled": False}, "card": {"enabled": False}}
    )
    projector = Projector(policy, Words())

    folded = projector.fold(events)
    messages, groups, tokens = fold_floor.columns(events, projector.start().pending_tokens)

    assert folded.window.groups[-1].pending  # the placeholder path is exercised
    assert folded.window.groups[0].entries[0].media == (image,)  # and the media one
    assert folded.compactions == 0
    assert (groups, tokens) == (len(folded.window.groups), folded.window.tokens)
    assert messages == sum(len(group.entries) for group in folded.window.groups)


def test_every_way_folds_every_session_event_of_the_ledger_once_a_run(tmp_path):
    """Each way is timed once a run over the calls, which hold each session event once; columns checked."""
    db, calls = _captured(tmp_path)
    with sqlite3.connect(db) as conn:
        session_events = conn.execute(
            "SELECT count(*) FROM ledger_events WHERE instr(originator_id, '::') = 0"
        ).fetchone()[0]

    result = fold_floor.phase_time(db, calls, runs=2)

    assert result["events"] == session_events
    assert {way: len(runs) for way, runs in result["times"].items()} == dict.fromkeys(fold_floor.WAYS, 2)


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
