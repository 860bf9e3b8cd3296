"""The context view folds sessions whose events interleave within one batch as it folds them one by one."""

from __future__ import annotations

from pathlib import Path

import contextledger
import pytest
from contextledger.adapters.store.projections import RecorderProjections
from contextledger.application.rebuild.card_facts import CARD_FACTS
from contextledger.application.rebuild.projection_runner import ProjectionRunner
from contextledger.application.render.context_rows import row_state
from contextledger.application.render.counted_reader import CountedReader
from contextledger.application.render.renderer import Renderer


def _views(ledger: contextledger.Ledger) -> RecorderProjections:
    return RecorderProjections(ledger.ports.log)  # type: ignore[arg-type]


def _rows(views: RecorderProjections, name: str) -> dict[str, tuple[int, bytes]]:
    rows = {key: views.load_row(name, key) for key in views.row_keys(name)}
    return {key: row for key, row in rows.items() if row is not None}


def _interleaved(ledger: contextledger.Ledger, sessions: int, turns: int) -> list[str]:
    """Sessions written turn by turn in rotation: each batch holds runs of every session, in turns."""
    ids = [ledger.start_session(system_prompt=f"agent {i}", model="m") for i in range(sessions)]
    for turn in range(turns):
        for i, session_id in enumerate(ids):
            ledger.add_user_message(session_id, f"task {turn} of session {i}: please fix the parser")
            call = {"id": f"c{i}-{turn}", "name": "shell", "arguments": '{"cmd": "pytest -q"}'}
            ledger.add_assistant_message(
                session_id, f"I decided to run the tests first (turn {turn}).", tool_calls=[call]
            )
            ledger.add_tool_result(session_id, f"c{i}-{turn}", f"{turn} failed\n" * 40, tool_name="shell")
    return ids


def test_interleaved_sessions_fold_in_one_batch_as_in_batches_of_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three sessions alternating inside one batch give the rows that batches of one event give.

    The batch's events reach each session's fold as read (its log is not read again), and under a second
    policy the token rows and card facts are read back rather than found, and the rows still agree; each
    row holds the state the renderer folds for its session.
    """
    reread: list[str] = []
    lazily = CountedReader._lazily

    def spy(self: CountedReader, session_id: str, *args: object, **kwargs: object) -> object:
        reread.append(session_id)
        return lazily(self, session_id, *args, **kwargs)  # type: ignore[arg-type]

    with contextledger.open_ledger(f"sqlite:///{tmp_path / 'mixed.db'}") as ledger:
        ids = _interleaved(ledger, sessions=3, turns=6)
        views = _views(ledger)
        for policy in ("default", "threshold"):
            whole = ProjectionRunner(ledger, views, views, policy=policy, projection=f"{policy}/whole")
            monkeypatch.setattr(CountedReader, "_lazily", spy)
            assert whole.run().batches == 1
            monkeypatch.undo()
            assert reread == []  # every session folded from the batch's own events
            single = ProjectionRunner(
                ledger, views, views, policy=policy, projection=f"{policy}/single", batch_size=1
            )
            assert single.run().batches > 3 * 6 * 3
            rows = _rows(views, f"{policy}/whole")
            assert set(rows) == set(ids)
            assert rows == _rows(views, f"{policy}/single")
            renderer = Renderer(ledger, snapshots=False)
            for session_id in ids:
                folded = renderer.state(session_id, whole.projector)
                assert row_state(ledger, session_id, rows[session_id][1]) == folded
                assert folded.card.decisions  # the card facts were found (then read back) for each session
        assert views.row_keys(CARD_FACTS) == sorted(f"{s}/0" for s in ids)
