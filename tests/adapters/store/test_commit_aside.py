"""``commit_aside`` and ``settle``: a commit that lands while its caller folds on, on every backend."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from contextledger.adapters.store.event_store import RecorderEventStore
from contextledger.adapters.store.factory import open_store
from contextledger.adapters.store.projections import RecorderProjections
from contextledger.domain.errors import StoreError, StoreUnavailableError
from contextledger.domain.ports import ProjectionCommit


@pytest.fixture
def store(any_url: str) -> Iterator[RecorderEventStore]:
    """An opened store on each backend."""
    opened = open_store(any_url)
    yield opened
    opened.close()


def _held(views: RecorderProjections, before: Callable[[], None]) -> None:
    """Make every commit of ``views`` call ``before`` first (on the thread that commits)."""
    tables: Any = views._tables
    commit = tables.projection_commit

    def held(commits: Sequence[ProjectionCommit], owner: str) -> None:
        before()
        commit(commits, owner)

    tables.projection_commit = held


def _batch(tracking: int, rows: dict[str, tuple[int, bytes]]) -> list[ProjectionCommit]:
    return [
        ProjectionCommit("p", "p", tracking, rows),
        ProjectionCommit("tokens", "", tracking, {f"{tracking:04d}/0": (tracking, b"counts")}),
    ]


def test_rows_set_aside_are_read_back_at_once_and_committed_by_settle(store):
    """After ``commit_aside`` its thread reads the rows by key, keys, range; settled, they stay."""
    views = RecorderProjections(store)
    views.commit("p", 3, {"s0": (1, b"old"), "s1": (2, b"before")})
    release = threading.Event()
    if views._tables.writes_aside:  # held back: the reads below come before it lands
        _held(views, lambda: release.wait(30))
    views.commit_aside(_batch(5, {"s1": (4, b"one"), "s2": (5, b"two")}))
    assert views.load_row("p", "s1") == (4, b"one")
    assert views.load_rows("p", ["s0", "s1", "s2", "s9"]) == {
        "s0": (1, b"old"),
        "s1": (4, b"one"),
        "s2": (5, b"two"),
    }
    assert views.load_range("p", "s0", "s9") == {"s1": (4, b"one"), "s2": (5, b"two")}
    assert views.load_range("tokens", "0000", "0005/\x7f") == {"0005/0": (5, b"counts")}
    assert views.row_keys("p") == ["s0", "s1", "s2"]
    release.set()
    views.settle()
    views.settle()  # nothing left: a no-op
    assert views.load_tracking("p") == 5
    assert views.load_rows("p", ["s1", "s2"]) == {"s1": (4, b"one"), "s2": (5, b"two")}
    assert views.load_row("tokens", "0005/0") == (5, b"counts")


def test_other_threads_read_only_what_is_committed(store):
    """While the commit is held back, another thread reads the rows before it; settled, it reads them."""
    views = RecorderProjections(store)
    if not views._tables.writes_aside:
        pytest.skip("this backend commits before commit_aside returns")
    views.commit("p", 3, {"s1": (2, b"before")})
    release = threading.Event()
    _held(views, lambda: release.wait(30))
    views.commit_aside(_batch(5, {"s1": (4, b"one"), "s2": (5, b"two")}))
    seen: dict[str, object] = {}

    def read() -> None:
        seen["rows"] = views.load_rows("p", ["s1", "s2"])
        seen["keys"] = views.row_keys("p")
        seen["tracking"] = views.load_tracking("p")

    reader = threading.Thread(target=read)
    reader.start()
    reader.join(30)
    assert seen == {"rows": {"s1": (2, b"before")}, "keys": ["s1"], "tracking": 3}
    assert views.load_rows("p", ["s1", "s2"]) == {"s1": (4, b"one"), "s2": (5, b"two")}  # this thread
    release.set()
    views.settle()
    reader = threading.Thread(target=read)
    reader.start()
    reader.join(30)
    assert seen == {"rows": {"s1": (4, b"one"), "s2": (5, b"two")}, "keys": ["s1", "s2"], "tracking": 5}


def test_a_refused_commit_set_aside_raises_at_settle_and_writes_nothing(store):
    """A commit behind the checkpoint raises the store's typed error; none of its rows is written."""
    views = RecorderProjections(store)
    views.commit("p", 9, {"s1": (4, b"kept")})

    def late() -> None:  # a store that commits at once raises from commit_aside, the others from settle
        views.commit_aside(_batch(8, {"s1": (5, b"late"), "s3": (1, b"late")}))
        views.settle()

    with pytest.raises(StoreError, match="move it back"):
        late()
    assert views.load_rows("p", ["s1", "s3"]) == {"s1": (4, b"kept")}
    assert views.load_row("tokens", "0008/0") is None
    assert views.load_tracking("p") == 9
    views.settle()  # the error is raised once


def test_later_writes_wait_for_the_commit_set_aside(store):
    """``commit_many``, ``drop`` and ``activate`` run after a slow commit set aside, never before it."""
    views = RecorderProjections(store)
    _held(views, lambda: time.sleep(0.2))
    views.commit_aside(_batch(5, {"s1": (4, b"first")}))
    views.commit_many(_batch(6, {"s1": (6, b"second")}))
    assert views.load_tracking("p") == 6
    assert views.load_row("p", "s1") == (6, b"second")
    views.commit_aside(_batch(7, {"s1": (7, b"third")}))
    views.drop("p")
    assert views.load_tracking("p") == 0
    assert views.row_keys("p") == []
    views.commit_aside(_batch(8, {"s1": (8, b"fourth")}))
    views.activate("context", "p")
    assert views.active("context") == "p"
    assert views.load_tracking("p") == 8


def test_writers_of_one_sqlite_process_take_turns_within_the_busy_timeout(tmp_path):
    """A second thread's write waits for the first one's turn, no longer than the busy timeout.

    A commit set aside and a count write set aside meet here instead of polling SQLite's write lock;
    past the timeout the wait ends in ``StoreUnavailableError``, as SQLite's own wait does.
    """
    store = open_store(f"sqlite:///{tmp_path / 'turns.db'}?timeout=0.3")
    recorder: Any = store.recorder
    entered, release = threading.Event(), threading.Event()

    def hold() -> None:
        with recorder.writing():
            entered.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    assert entered.wait(30)
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError, match="another writer of this process"):
        store.save_token_counts("t", {"k": 1})
    assert time.monotonic() - started >= 0.3
    views = RecorderProjections(store)
    views.commit_aside(_batch(5, {"s1": (1, b"one")}))  # waits its turn on its own thread
    time.sleep(0.1)
    release.set()
    holder.join(30)
    views.settle()
    store.save_token_counts("t", {"k": 1})
    assert views.load_tracking("p") == 5
    assert store.load_token_counts("t", ["k"]) == {"k": 1}
    store.close()
