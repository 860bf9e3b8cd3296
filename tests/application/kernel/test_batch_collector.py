"""A batched append runs with the cyclic collector paused, and leaves it as it found it (ADR 0048)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import contextledger
import pytest
from contextledger.domain.errors import UnknownToolCallError
from contextledger.testing import FixedClock


class _WatchingClock(FixedClock):
    """A clock that notes, at each reading, whether the cyclic collector is on."""

    def __init__(self) -> None:
        super().__init__()
        self.collecting: list[bool] = []

    def now(self) -> datetime:
        self.collecting.append(gc.isenabled())
        return super().now()


@pytest.fixture
def collector_on() -> Iterator[None]:
    """The collector on for the test, and as it was after it."""
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


@pytest.mark.usefixtures("collector_on")
@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_a_batch_drafts_with_the_collector_paused_and_turns_it_back_on(tmp_path: Path, backend: str) -> None:
    """Each event of a batch is drafted while the collector is off; a single message is not paused."""
    clock = _WatchingClock()
    url = "memory://" if backend == "memory" else f"sqlite:///{tmp_path / 'l.db'}"
    with contextledger.open_ledger(url, clock=clock) as ledger:
        session_id = ledger.start_session()
        clock.collecting.clear()
        ledger.append_many(session_id, [{"role": "user", "content": str(i)} for i in range(3)])
        assert clock.collecting == [False, False, False]
        assert gc.isenabled()
        clock.collecting.clear()
        ledger.append(session_id, {"role": "user", "content": "one"})
        assert clock.collecting == [True]


@pytest.mark.usefixtures("collector_on")
def test_a_refused_batch_turns_the_collector_back_on(tmp_path: Path) -> None:
    """A batch refused by the rules stores nothing and leaves the collector on."""
    with contextledger.open_ledger(f"sqlite:///{tmp_path / 'l.db'}") as ledger:
        session_id = ledger.start_session()
        batch = [{"role": "user", "content": "a"}, {"role": "tool", "call_id": "nope", "content": "x"}]
        with pytest.raises(UnknownToolCallError):  # refused by the rules, inside the paused block
            ledger.append_many(session_id, batch)
        assert gc.isenabled()
        assert ledger.version(session_id) == 1


@pytest.mark.usefixtures("collector_on")
def test_a_batch_leaves_a_collector_its_caller_turned_off_off(tmp_path: Path) -> None:
    """A caller that turned the collector off finds it off after a batch."""
    with contextledger.open_ledger(f"sqlite:///{tmp_path / 'l.db'}") as ledger:
        session_id = ledger.start_session()
        gc.disable()
        ledger.append_many(session_id, [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
        assert not gc.isenabled()
        gc.enable()
