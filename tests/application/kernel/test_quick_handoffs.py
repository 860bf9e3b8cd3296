"""A catch-up hands the GIL over quickly while its reads and commits run aside, then puts it back."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator, Sequence

import contextledger
import pytest
from contextledger.adapters.store.projections import RecorderProjections
from contextledger.application.kernel.handoffs import QUICK_SWITCH_SECONDS, quick_handoffs
from contextledger.application.views.view_runner import Rows, ViewRunner
from contextledger.domain.ports import Notification


@pytest.fixture
def default_interval() -> Iterator[float]:
    """The interpreter's interval at 5 ms for the test (CPython's default), and as it was after it."""
    was = sys.getswitchinterval()
    sys.setswitchinterval(0.005)
    yield 0.005
    sys.setswitchinterval(was)


def test_the_interval_is_short_inside_and_put_back_after_even_on_an_error(default_interval: float):
    """Inside: QUICK_SWITCH_SECONDS; after the block, and after one that raised, the interval found."""
    with quick_handoffs():
        assert sys.getswitchinterval() == pytest.approx(QUICK_SWITCH_SECONDS)
        with quick_handoffs():  # nested: the outer block puts it back
            pass
        assert sys.getswitchinterval() == pytest.approx(QUICK_SWITCH_SECONDS)
    assert sys.getswitchinterval() == pytest.approx(default_interval)
    with pytest.raises(RuntimeError, match="boom"), quick_handoffs():
        raise RuntimeError("boom")
    assert sys.getswitchinterval() == pytest.approx(default_interval)


def test_a_shorter_interval_set_by_the_host_is_kept(default_interval: float):
    """A host that already switches more often than QUICK_SWITCH_SECONDS keeps its own interval."""
    sys.setswitchinterval(QUICK_SWITCH_SECONDS / 5)
    own = sys.getswitchinterval()  # as the interpreter keeps it (whole microseconds)
    with quick_handoffs():
        assert sys.getswitchinterval() == own
    assert sys.getswitchinterval() == own


def test_blocks_on_two_threads_share_one_shortening_and_the_last_puts_it_back(default_interval: float):
    """Thread A enters, B enters, A leaves (still short: B is inside), B leaves: the interval found by A."""
    a_inside, b_inside, a_left = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, float] = {}

    def a() -> None:
        with quick_handoffs():
            a_inside.set()
            b_inside.wait(5)
        a_left.set()

    def b() -> None:
        a_inside.wait(5)
        with quick_handoffs():
            b_inside.set()
            a_left.wait(5)
            seen["after A left"] = sys.getswitchinterval()

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert seen["after A left"] == pytest.approx(QUICK_SWITCH_SECONDS)
    assert sys.getswitchinterval() == pytest.approx(default_interval)


class _Watching:
    """A view that notes the switch interval each time it folds a batch."""

    name = "watching"

    def __init__(self) -> None:
        self.failed: dict[str, str] = {}
        self.intervals: list[float] = []

    def begin(self, tracking: int) -> None:
        del tracking

    def fold(self, after: int, upto: int, batch: Sequence[Notification]) -> dict[str, Rows]:
        self.intervals.append(sys.getswitchinterval())
        return {self.name: {str(note.id): (note.id, b"x") for note in batch}}


def test_a_catch_up_folds_with_quick_handoffs_and_leaves_the_interval_as_it_was(tmp_path, default_interval):
    """Every batch of a SQLite catch-up (reads ahead, commits aside) folds under the short interval."""
    with contextledger.open_ledger(f"sqlite:///{tmp_path / 'l.db'}") as ledger:
        ledger.start_session(session_id="s")
        ledger.append_many("s", [{"role": "user", "content": f"m{i}"} for i in range(9)])
        views = RecorderProjections(ledger.ports.log)  # type: ignore[arg-type]
        view = _Watching()
        assert ViewRunner(views, views, [view], batch_size=4).run().events == 10
    assert len(view.intervals) >= 3
    assert view.intervals == [pytest.approx(QUICK_SWITCH_SECONDS)] * len(view.intervals)
    assert sys.getswitchinterval() == pytest.approx(default_interval)
