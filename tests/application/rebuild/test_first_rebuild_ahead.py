"""A first rebuild counting the next batch on the tokenizer thread writes what counting in place writes."""

from __future__ import annotations

import shutil
import sqlite3
import threading
from pathlib import Path

import contextledger
from contextledger.adapters.tokenizers import get_counter
from contextledger.application.rebuild import context_view
from contextledger.application.rebuild.audit_views import AUDIT_VIEWS, audit_views
from contextledger.application.rebuild.blue_green import RebuildSpec
from contextledger.application.rebuild.projection_runner import ProjectionRunner
from contextledger.application.rebuild.rebuild import rebuild, store_views
from contextledger.projections.presets import get_preset

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
    monkeypatch.setattr(context_view, "UNSAVED_COUNTS", 2_000)
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


def test_a_rebuild_writes_its_last_counts_once_its_leases_are_released_and_returns_with_all_stored(
    full_db,  # noqa: F811
    tmp_path,
    monkeypatch,
):
    """Groups are written while folding; the last counts after the leases are released, beside the comparison.

    A write of counts holds the store's one writer; started by the last batch it held up that batch's commit,
    and started by ``finish`` it held up the release of the leases. When ``rebuild`` returns, every count it
    tokenized is stored, once.
    """
    monkeypatch.setattr(context_view, "UNSAVED_COUNTS", 2_000)
    copy = tmp_path / "last.db"
    shutil.copy(full_db, copy)
    with contextledger.open_ledger(f"sqlite:///{copy}") as ledger:
        views, _ = store_views(ledger)
        store = ledger.ports.token_counts
        saves: list[tuple[int, int, str]] = []
        save = type(store).save_token_counts

        def recorded(self, tokenizer, counts):
            saves.append((len(counts), len(views.leases()), threading.current_thread().name))
            save(self, tokenizer, counts)

        monkeypatch.setattr(type(store), "save_token_counts", recorded)
        result = rebuild(ledger, RebuildSpec(get_preset("default").model_dump_json(), None, "cl100k_base"))
        assert result.stats.failed == {}
        assert result.comparison is not None
        assert result.comparison.candidate.sessions > 1
    assert len(saves) > 2
    *groups, (last, leases, thread) = saves
    assert all(size >= 2_000 and held > 0 for size, held, _ in groups)
    assert (leases, thread) == (0, "contextledger-counts")
    assert last > 0
    with sqlite3.connect(copy) as db:
        stored = db.execute("SELECT COUNT(*) FROM ledger_token_counts").fetchone()[0]
    assert stored == sum(n for n, _, _ in saves)
