"""The view runner hands views each batch one fold early, and ends each catch-up with ``finish``."""

from __future__ import annotations

from collections.abc import Sequence

import contextledger
import pytest
from contextledger.adapters.store.projections import RecorderProjections
from contextledger.application.views.view_runner import Rows, ViewRunner
from contextledger.domain.ports import Notification


class Recording:
    """A view that records every call it gets and writes one row per event."""

    name = "recording"

    def __init__(self) -> None:
        self.failed: dict[str, str] = {}
        self.calls: list[tuple[str, int, int]] = []
        self.folded: list[int] = []

    def begin(self, tracking: int) -> None:
        self.calls.append(("begin", tracking, tracking))

    def ahead(self, after: int, upto: int, batch: Sequence[Notification]) -> None:
        self.calls.append(("ahead", after, upto))

    def fold(self, after: int, upto: int, batch: Sequence[Notification]) -> dict[str, Rows]:
        self.calls.append(("fold", after, upto))
        self.folded += [note.id for note in batch]
        return {self.name: {str(note.id): (note.id, b"x") for note in batch}}

    def finish(self) -> None:
        self.calls.append(("finish", 0, 0))


@pytest.fixture
def ledger(tmp_path):
    """A SQLite ledger with 23 events in one session."""
    with contextledger.open_ledger(f"sqlite:///{tmp_path / 'ahead.db'}") as opened:
        opened.start_session(session_id="s")
        opened.append_many("s", [{"role": "user", "content": f"m{i}"} for i in range(22)])
        yield opened


def test_each_batch_is_handed_ahead_in_order_before_the_fold_of_the_one_before_it(ledger):
    """ahead(b0), then ahead(b[k+1]) just before fold(b[k]); finish after the last fold."""
    views = RecorderProjections(ledger.ports.log)  # type: ignore[arg-type]
    view = Recording()
    stats = ViewRunner(views, views, [view], batch_size=5).run()
    assert stats.events == 23
    assert view.folded == list(range(1, 24))  # every event once, in order
    bounds = [(0, 5), (5, 10), (10, 15), (15, 20), (20, 23)]
    expected = [("begin", 0, 0)]
    expected.append(("ahead", *bounds[0]))
    for k, bound in enumerate(bounds):
        if k + 1 < len(bounds):
            expected.append(("ahead", *bounds[k + 1]))
        expected.append(("fold", *bound))
    expected.append(("finish", 0, 0))
    assert view.calls == expected
    assert views.load_tracking("recording") == 23


def test_finish_ends_every_catch_up_even_one_with_nothing_to_fold(ledger):
    """A second run has no batch: the view begins and finishes, nothing is handed or folded."""
    views = RecorderProjections(ledger.ports.log)  # type: ignore[arg-type]
    ViewRunner(views, views, [Recording()], batch_size=5).run()
    view = Recording()
    assert ViewRunner(views, views, [view], batch_size=5).run().events == 0
    assert view.calls == [("begin", 23, 23), ("finish", 0, 0)]
