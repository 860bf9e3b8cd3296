"""A rebuild's catch-up keeps in memory only the sessions in flight: one folded to its last event leaves."""

from __future__ import annotations

import contextledger
from contextledger.application.rebuild.projection_runner import ProjectionRunner
from contextledger.application.rebuild.rebuild import store_views
from contextledger.domain.ports import ProjectionStore


def _rows(views: ProjectionStore, name: str) -> dict[str, tuple[int, bytes] | None]:
    return {key: views.load_row(name, key) for key in views.row_keys(name)}


def _runner(ledger: contextledger.Ledger, name: str, *, release: bool) -> ProjectionRunner:
    views, reader = store_views(ledger)
    runner = ProjectionRunner(ledger, reader, views, policy="threshold", projection=name, batch_size=97)
    runner.context.release_at_head = release
    return runner


def test_sessions_at_their_head_leave_memory_and_the_rows_equal_those_of_a_view_keeping_every_state(
    two_transcripts_each_store,
):
    """Released after each batch, the states leave the same rows (SQLite and PostgreSQL); kept, all stay."""
    ledger = two_transcripts_each_store
    sessions = [info.session_id for info in ledger.sessions()]
    kept, released = _runner(ledger, "kept", release=False), _runner(ledger, "released", release=True)
    kept.run()
    released.run()
    assert all(kept.renderer.position_of(s, kept.projector) > 0 for s in sessions)
    assert all(released.renderer.position_of(s, released.projector) == 0 for s in sessions)
    views = store_views(ledger)[0]
    assert _rows(views, "released") == _rows(views, "kept")


def test_a_released_session_touched_again_folds_on_from_its_row_to_a_full_replays_row(
    two_transcripts_each_store,
):
    """Events appended after its release are folded onto the row it left: the row equals a fresh rebuild's."""
    ledger = two_transcripts_each_store
    session = ledger.sessions()[0].session_id
    released = _runner(ledger, "released", release=True)
    released.run()
    assert released.renderer.position_of(session, released.projector) == 0
    ledger.add_user_message(session, "one more question about the same files")
    ledger.add_assistant_message(session, "the same answer, once more")
    released.run()
    assert released.renderer.position_of(session, released.projector) == 0  # at its head again: released
    _runner(ledger, "fresh", release=False).run()
    views = store_views(ledger)[0]
    assert _rows(views, "released") == _rows(views, "fresh")


def test_heads_read_ahead_release_a_fork_at_its_own_positions(forked):
    """The heads read on another thread are the stored ones, mapped to a fork's positions as it folds.

    The fork (4 stored events, head 9 in its positions), its parent and a one-event session all leave memory
    at their heads, and the rows equal those of a view keeping every state.
    """
    ledger, fork = forked, "child"
    ledger.start_session(session_id="late", system_prompt="sys")
    assert ledger.log.inner.versions([fork]) == {fork: 4}
    released, kept = _runner(ledger, "released", release=True), _runner(ledger, "kept", release=False)
    released.run()
    kept.run()
    sessions = ("parent", fork, "late")
    assert {s: kept.renderer.position_of(s, kept.projector) for s in sessions} == {
        "parent": 11,
        fork: 9,
        "late": 1,
    }
    assert {s: released.renderer.position_of(s, released.projector) for s in sessions} == dict.fromkeys(
        sessions, 0
    )
    views = store_views(ledger)[0]
    assert _rows(views, "released") == _rows(views, "kept")
