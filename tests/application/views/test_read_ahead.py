"""The view runner hands views each batch ``READ_AHEAD`` folds early; each catch-up ends with ``finish``."""

from __future__ import annotations

from collections.abc import Sequence

import contextledger
import pytest
from contextledger.adapters.store.projections import RecorderProjections
from contextledger.application.views.view_runner import FIRST_BATCH_SHARE, READ_AHEAD, Rows, Shard, ViewRunner
from contextledger.domain.ports import Notification, ProjectionCommit


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


def test_each_batch_is_handed_ahead_in_order_read_ahead_folds_before_its_own(ledger):
    """ahead(b0..b2), then ahead(b[k+3]) just before fold(b[k]) (READ_AHEAD 2); finish after the last.

    The batches grow from an eighth of ``batch_size`` (FIRST_BATCH_SHARE), doubling: 2, 4, 8, 16, then 16s.
    """
    assert (READ_AHEAD, FIRST_BATCH_SHARE) == (2, 8)  # the order below is written out for these
    views = RecorderProjections(ledger.ports.log)  # type: ignore[arg-type]
    view = Recording()
    stats = ViewRunner(views, views, [view], batch_size=16).run()
    assert stats.events == 23
    assert view.folded == list(range(1, 24))  # every event once, in order
    assert view.calls == [
        ("begin", 0, 0),
        ("ahead", 0, 2),
        ("ahead", 2, 6),
        ("ahead", 6, 14),
        ("fold", 0, 2),
        ("ahead", 14, 23),
        ("fold", 2, 6),
        ("fold", 6, 14),
        ("fold", 14, 23),
        ("finish", 0, 0),
    ]
    assert stats.batches == 4
    assert views.load_tracking("recording") == 23


def test_a_view_past_the_others_is_handed_ahead_only_what_it_has_not_folded(ledger):
    """A view checkpointed at 12 beside one at 0: handed (and folding) only the events after 12, once each."""
    views = RecorderProjections(ledger.ports.log)  # type: ignore[arg-type]
    behind, past = Recording(), Recording()
    past.name = "past"
    views.commit_many([ProjectionCommit("past", "past", 12, {})])
    ViewRunner(views, views, [behind, past], batch_size=5).run()
    assert behind.folded == list(range(1, 24))
    assert past.folded == list(range(13, 24))
    handed = [(after, upto) for kind, after, upto in past.calls if kind == "ahead"]
    assert handed == [(12, 17), (17, 22), (22, 23)]  # batches 0-1, 1-3, 3-7, 7-12, 12-17, 17-22, 22-23
    assert [(a, u) for kind, a, u in past.calls if kind == "fold"] == handed


def test_finish_ends_every_catch_up_even_one_with_nothing_to_fold(ledger):
    """A second run has no batch: the view begins and finishes, nothing is handed or folded."""
    views = RecorderProjections(ledger.ports.log)  # type: ignore[arg-type]
    ViewRunner(views, views, [Recording()], batch_size=5).run()
    view = Recording()
    assert ViewRunner(views, views, [view], batch_size=5).run().events == 0
    assert view.calls == [("begin", 23, 23), ("finish", 0, 0)]


class Logged:
    """A reader and store that log each batch read and each commit set aside, around the real ones."""

    def __init__(self, inner: RecorderProjections, log: list[str]) -> None:
        self.inner = inner
        self.log = log

    def __getattr__(self, name: str) -> object:
        """Everything else is the real store's."""
        return getattr(self.inner, name)

    def read_batch(self, after, limit, keep=None):
        batch = self.inner.read_batch(after, limit, keep)
        self.log.append(f"read {after}-{batch.last_id}")
        return batch

    def commit_aside(self, commits):
        self.log.append(f"commit {commits[0].tracking}")
        self.inner.commit_aside(commits)


def test_the_coming_batch_is_read_before_the_folded_one_is_committed_aside(ledger):
    """After each fold the runner reads what its queue lacks, then sets the batch's commit aside (ADR 57)."""
    log: list[str] = []
    logged = Logged(RecorderProjections(ledger.ports.log), log)  # type: ignore[arg-type]
    view = Recording()
    ViewRunner(logged, logged, [view], batch_size=16).run()  # type: ignore[arg-type]
    assert log == [
        "read 0-2",
        "read 2-6",
        "read 6-14",
        "read 14-23",  # after the fold of 0-2, before its commit
        "commit 2",
        "read 23-0",  # the reader has nothing more
        "commit 6",
        "commit 14",
        "commit 23",
    ]


class ScanRecording(RecorderProjections):
    """The SQLite reader, recording which pages it was asked to gather ahead and what it read."""

    def __init__(self, store: object) -> None:
        super().__init__(store)  # type: ignore[arg-type]
        self.asked: list[tuple[str, int, int]] = []

    def scan_ahead(self, after: int, limit: int) -> None:
        self.asked.append(("scan_ahead", after, limit))
        super().scan_ahead(after, limit)

    def read_batch(self, after, limit, keep=None):  # type: ignore[no-untyped-def]
        self.asked.append(("read", after, limit))
        return super().read_batch(after, limit, keep)

    def end_scans(self) -> None:
        self.asked.append(("end", 0, 0))
        super().end_scans()


def test_the_page_read_next_is_gathered_ahead_while_the_batch_before_folds(ledger):
    """After each fill the runner asks the reader to gather the page it reads next; the catch-up ends scans.

    Each read after the first fill is the page asked for just before (taken, not read again), and a
    sharded runner (which decodes only its streams) asks for none.
    """
    views = ScanRecording(ledger.ports.log)
    ViewRunner(views, views, [Recording()], batch_size=16).run()
    asked = views.asked
    assert asked[-1] == ("end", 0, 0)
    scans = [i for i, (what, *_) in enumerate(asked) if what == "scan_ahead"]
    assert scans
    for i in scans:  # the read that follows a scan is that scan's page
        nxt = next(call for call in asked[i + 1 :] if call[0] == "read")
        assert nxt[1:] == asked[i][1:]
    sharded = ScanRecording(ledger.ports.log)
    ViewRunner(sharded, sharded, [Recording()], batch_size=16, shard=Shard(0, 2)).run()
    assert [what for what, *_ in sharded.asked if what == "scan_ahead"] == []
