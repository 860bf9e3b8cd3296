"""A first rebuild counting the next batch on the tokenizer thread writes what counting in place writes."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import contextledger
from contextledger.adapters.tokenizers import get_counter
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
