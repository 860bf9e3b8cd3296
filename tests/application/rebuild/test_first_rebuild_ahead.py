"""A first rebuild counting the next batch on the tokenizer thread writes what counting in place writes."""

from __future__ import annotations

import shutil
import sqlite3
import threading
from pathlib import Path

import contextledger
from contextledger.adapters.tokenizers import get_counter
from contextledger.application.rebuild import projection_runner
from contextledger.application.rebuild.audit_views import AUDIT_VIEWS, audit_views
from contextledger.application.rebuild.projection_runner import ProjectionRunner

from tests.adapters.test_count_ahead import Sequential
from tests.application.rebuild.test_projection_runner import _views, full_db  # noqa: F401 - the fixture


class Ahead:
    """tiktoken counting ahead, recording how many batches it was handed."""

    def __init__(self) -> None:
        self.inner = get_counter("cl100k_base")
        self.name = self.inner.name
        self.handed = 0

    def count(self, text: str) -> int:
        return self.inner.count(text)

    def count_many(self, texts):
        return self.inner.count_many(texts)

    def count_ahead(self, texts):
        self.handed += 1
        return self.inner.count_ahead(texts)  # type: ignore[attr-defined]


def _dump(path: Path) -> dict[str, list[tuple[object, ...]]]:
    with sqlite3.connect(path) as db:
        return {
            table: db.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()
            for table in ("ledger_projection_rows", "ledger_token_counts", "ledger_projection_tracking")
        }


def test_a_first_rebuild_reading_ahead_equals_one_counting_in_place(full_db, tmp_path):  # noqa: F811
    """Every row (context, digests, token rows, audit views), cached count and checkpoint, byte for byte."""
    dumps = {}
    for name, counter in (("ahead", Ahead()), ("in place", Sequential())):
        copy = tmp_path / f"{name.replace(' ', '-')}.db"
        shutil.copy(full_db, copy)
        with contextledger.open_ledger(f"sqlite:///{copy}") as ledger:
            views = _views(ledger)
            also = audit_views(ledger, views, list(AUDIT_VIEWS))
            runner = ProjectionRunner(ledger, views, views, tokenizer=counter, batch_size=300, also=also)
            assert runner.run().failed == {}
        dumps[name] = _dump(copy)
        if isinstance(counter, Ahead):
            assert counter.handed > 3  # the batches were counted ahead
    assert dumps["ahead"] == dumps["in place"]
    assert dumps["ahead"]["ledger_token_counts"]


class Writes:
    """The ledger's token count store, recording the size of each write."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.sizes: list[int] = []
        self.threads: set[str] = set()

    @property
    def writes_aside(self):
        return self.inner.writes_aside

    def load_token_counts(self, tokenizer, keys):
        return self.inner.load_token_counts(tokenizer, keys)

    def save_token_counts(self, tokenizer, counts):
        self.threads.add(threading.current_thread().name)
        self.sizes.append(len(counts))
        self.inner.save_token_counts(tokenizer, counts)


def test_a_rebuild_writes_fresh_counts_in_large_groups_and_the_rest_when_it_ends(
    full_db,  # noqa: F811
    tmp_path,
    monkeypatch,
):
    """Groups of at least ``UNSAVED_COUNTS`` while folding (written aside), the rest at the end: all kept."""
    monkeypatch.setattr(projection_runner, "UNSAVED_COUNTS", 2_000)
    copy = tmp_path / "groups.db"
    shutil.copy(full_db, copy)
    with contextledger.open_ledger(f"sqlite:///{copy}") as ledger:
        views = _views(ledger)
        runner = ProjectionRunner(ledger, views, views, batch_size=300)
        counter = runner.renderer.counter
        writes = counter.counts = Writes(counter.counts)
        stats = runner.run()
        assert stats.failed == {}
        assert stats.batches > len(writes.sizes) > 2
        assert all(size >= 2_000 for size in writes.sizes[:-1])
        assert sum(writes.sizes) == counter.tokenized
        assert writes.threads == {"MainThread", "contextledger-counts"}  # groups aside, the rest at the end
    with sqlite3.connect(copy) as db:
        assert db.execute("SELECT COUNT(*) FROM ledger_token_counts").fetchone()[0] == counter.tokenized
