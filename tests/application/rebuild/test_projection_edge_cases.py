"""Edge cases of the checkpointed views found in review: late artifacts, forks, late results, bad rows."""

from __future__ import annotations

import contextledger
import pytest
from contextledger.adapters.store.projections import RecorderProjections
from contextledger.application.rebuild.projection_runner import ProjectionRunner
from contextledger.application.render.context_rows import row_state
from contextledger.application.render.context_versions import CONTEXT_VIEW
from contextledger.application.render.renderer import Renderer
from contextledger.application.search.search_view import SearchView, chunk_sketches
from contextledger.application.search.text_index import CHUNK
from contextledger.application.views.view_runner import ViewRunner
from contextledger.domain.ports import ProjectionCommit


@pytest.fixture
def ledger(tmp_path):
    """A fresh SQLite ledger."""
    with contextledger.open_ledger(f"sqlite:///{tmp_path / 'edge.db'}") as opened:
        yield opened


def _views(ledger: contextledger.Ledger) -> RecorderProjections:
    return RecorderProjections(ledger.ports.log)  # type: ignore[arg-type]


def _talk(ledger: contextledger.Ledger, session: str, turns: int) -> None:
    for number in range(turns):
        ledger.add_user_message(session, f"question {number} " + "word " * 50)
        ledger.add_assistant_message(session, f"answer {number} " + "word " * 50)


def _same_as_renderer(
    ledger: contextledger.Ledger, views: RecorderProjections, name: str, session: str
) -> bool:
    row = views.load_row(name, session)
    assert row is not None
    fresh = Renderer(ledger, snapshots=False)
    return row_state(ledger, session, row[1]) == fresh.state(session, fresh.projector("default"))


def test_an_artifact_not_due_yet_is_folded_when_its_position_arrives(ledger):
    """A worker's artifact (produced after the head) arriving alone is kept until the next event folds it."""
    ledger.start_session(session_id="s", system_prompt="sys")
    _talk(ledger, "s", 6)
    views = _views(ledger)
    tail = ProjectionRunner(ledger, views, views)
    tail.run()
    ledger.record_summary("s", covers_from=2, covers_through=9, text="summary " * 20)  # due after 13
    tail.catch_up()
    ledger.add_user_message("s", "next")
    tail.catch_up()
    assert _same_as_renderer(ledger, views, tail.projection, "s")
    state = row_state(ledger, "s", (views.load_row(tail.projection, "s") or (0, b""))[1])
    assert len(state.available) == 1


@pytest.mark.parametrize("batch_size", [1, 14, 1_000])
def test_a_fork_from_a_summary_starts_at_its_fork_point_with_the_summary(ledger, batch_size):
    """A fork's row is at the fork point from its first event, with the FORK_START artifact folded."""
    ledger.start_session(session_id="parent", system_prompt="sys")
    _talk(ledger, "parent", 6)
    ledger.record_summary("parent", covers_from=2, covers_through=9, text="summary " * 20, produced_at=10)
    child = ledger.fork("parent", 11, from_summary=True, new_session_id="child")
    views = _views(ledger)
    runner = ProjectionRunner(ledger, views, views, batch_size=batch_size)
    assert runner.run().failed == {}
    assert (views.load_row(runner.projection, child) or (0, b""))[0] == ledger.version(child) == 11
    assert _same_as_renderer(ledger, views, runner.projection, child)
    ledger.add_user_message(child, "child question")
    runner.run()
    assert _same_as_renderer(ledger, views, runner.projection, child)


def test_a_late_tool_result_does_not_make_its_row_unreadable(ledger):
    """A result joining its call's group after a later user message: the row still reads back."""
    ledger.start_session(session_id="s", system_prompt="sys")
    ledger.add_user_message("s", "hi")
    ledger.add_assistant_message(
        "s",
        "calling",
        tool_calls=[{"id": "c1", "name": "t", "arguments": {}}, {"id": "c2", "name": "t", "arguments": {}}],
    )
    ledger.add_tool_result("s", "c1", "result one")
    ledger.add_user_message("s", "meanwhile")
    ledger.add_tool_result("s", "c2", "late result two")
    views = _views(ledger)
    runner = ProjectionRunner(ledger, views, views)
    assert runner.run().failed == {}
    assert _same_as_renderer(ledger, views, runner.projection, "s")
    ledger.add_user_message("s", "next")
    assert ProjectionRunner(ledger, views, views).run().failed == {}  # reads the row back


def test_an_unreadable_row_is_refolded_from_the_log(ledger):
    """A row in another layout neither breaks rendering nor the runner: it is folded again from the log."""
    ledger.start_session(session_id="s", system_prompt="sys")
    ledger.add_user_message("s", "hi")
    views = _views(ledger)
    runner = ProjectionRunner(ledger, views, views)
    runner.run()
    views.activate(CONTEXT_VIEW, runner.projection)
    views.commit_many([ProjectionCommit(runner.projection, "", 0, {"s": (2, b"\x93\x80\x90\x90")})])
    assert len(Renderer(ledger).render("s").messages) == 1
    ledger.add_user_message("s", "again")
    assert ProjectionRunner(ledger, views, views).run().failed == {}
    assert _same_as_renderer(ledger, views, runner.projection, "s")


def test_the_search_view_sketches_a_fork_whose_own_events_complete_a_chunk(ledger):
    """A fork's first event stands apart from its own later events: the chunk's rest is read back."""
    ledger.start_session(session_id="parent", system_prompt="sys")
    ledger.append_many("parent", [{"role": "user", "content": f"q{i}"} for i in range(CHUNK - 11)])
    child = ledger.fork("parent", CHUNK - 10, new_session_id="child")
    for number in range(12):
        ledger.add_user_message(child, f"c{number}")
    views = _views(ledger)
    view = SearchView(ledger, views)
    assert ViewRunner(views, views, [view], batch_size=1_000).run().failed == {}
    assert sorted(chunk_sketches(views, child)) == [0]
