"""The search view: rows are TextIndex's sketches; incremental, restarted, sharded, SQLite and PostgreSQL."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import contextledger
import pytest
from contextledger.adapters.store.projections import RecorderProjections
from contextledger.application.search import text_index
from contextledger.application.search.search_view import SEARCH_VIEW, SearchView, chunk_key, chunk_sketches
from contextledger.application.search.text_index import CHUNK, FORMAT, TextIndex
from contextledger.application.views.view_runner import Shard, ViewRunner
from contextledger.domain.errors import StoreError

SMALL = 16
"""The chunk size of most tests (TextIndex's module constant is patched to match)."""

TARGETS = [
    {"a": 7, "b": 5, "c": 10, "d": 3},
    {"a": 20, "c": 16, "d": 16},
    {"a": 33, "b": 13, "c": 32, "d": 17},
    {"a": 53, "e": 40},
]
"""Each step grows sessions to these positions: chunks complete mid-batch, at a batch's end, or never."""


def _grow(ledger, session: str, target: int) -> None:
    """Append a user message, a tool call and its (blob-sized) result, in turn, up to ``target``."""
    if session not in {s.session_id for s in ledger.sessions()}:
        ledger.start_session(session_id=session, system_prompt=f"System of {session}: Be Brief")
    while (position := ledger.version(session) + 1) <= target:
        if position % 3 == 2:
            ledger.add_user_message(session, f"Alpha{position} shared Ünïcode wörd{position % 5} {session}")
        elif position % 3 == 0:
            ledger.add_assistant_message(
                session,
                f"Reply {position} ok",
                reasoning=f"thinking{position}",
                tool_calls=[
                    {"id": f"k{position}", "name": f"tool_{position % 4}", "arguments": {"p": position}}
                ],
            )
        else:
            ledger.add_tool_result(session, f"k{position - 1}", f"line {position} ÆØÅ big\n" * 40)


def _story(ledger) -> Iterator[None]:
    for step in TARGETS:
        for session, target in step.items():
            _grow(ledger, session, target)
        yield


def _open(url: str) -> contextledger.Ledger:
    return contextledger.open_ledger(url, blob_threshold=256)


def _store(ledger) -> RecorderProjections:
    return RecorderProjections(ledger.ports.log)


def _rows(store: RecorderProjections, name: str) -> dict[str, tuple[int, bytes] | None]:
    return {key: store.load_row(name, key) for key in store.row_keys(name)}


def _sqlite(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.db'}"


def _assert_textindex_sketches(ledger, store, chunk: int, name: str = SEARCH_VIEW) -> int:
    """Every full chunk's row is the (position, bytes) TextIndex saves for it; return how many."""
    index = TextIndex(ledger, from_view=False)  # built from the log, not from the rows under test
    rows = 0
    for info in ledger.sessions():
        session = info.session_id
        full = ledger.version(session) // chunk
        list(index.scan(session, "anything at all"))  # builds and saves every full chunk's sketch
        sketches = chunk_sketches(store, session, name=name)
        assert sorted(sketches) == list(range(full))
        for number, data in sketches.items():
            saved = ledger.ports.snapshots.load_snapshot(f"search/v{FORMAT}/{session}/{number}")
            assert store.load_row(name, chunk_key(session, number)) == saved == ((number + 1) * chunk, data)
            assert zlib.decompress(data) == index._sketch(session, number)
        rows += full
    return rows


def test_rows_are_the_sketches_textindex_builds(tmp_path, monkeypatch):
    """Each full chunk has one row holding TextIndex's sketch bytes; sessions shorter than a chunk none."""
    monkeypatch.setattr(text_index, "CHUNK", SMALL)
    with _open(_sqlite(tmp_path)) as ledger:
        for _ in _story(ledger):
            pass
        store = _store(ledger)
        view = SearchView(ledger, store, chunk=SMALL)
        assert ViewRunner(store, store, [view]).run().failed == {}
        assert view.read_back == 0  # folded from the start in one process: nothing read back
        assert _assert_textindex_sketches(ledger, store, SMALL) == 3 + 0 + 2 + 1 + 2
        assert chunk_sketches(store, "b") == {}
        sketch = zlib.decompress(chunk_sketches(store, "a")[0]).decode().split("\n")
        assert {"alpha2", "unicode", "tool_3", "thinking3", "æøa", "be", "brief"} <= set(sketch)  # folded


def test_rows_at_the_real_chunk_size(tmp_path):
    """At TextIndex's own CHUNK, a long session's full chunks get its sketches; the tail none."""
    with _open(_sqlite(tmp_path)) as ledger:
        session = ledger.start_session(session_id="long", system_prompt="sys")
        messages = [{"role": "user", "content": f"word{i} common {i % 7}"} for i in range(2 * CHUNK + 3)]
        for start in range(0, len(messages), 1_000):
            ledger.append_many(session, messages[start : start + 1_000])
        _grow(ledger, "short", 40)
        store = _store(ledger)
        assert ViewRunner(store, store, [SearchView(ledger, store)], batch_size=700).run().failed == {}
        assert _assert_textindex_sketches(ledger, store, CHUNK) == 2


def _incremental_equals_scratch(url: str) -> None:
    with _open(url) as ledger:
        store = _store(ledger)
        kept = SearchView(ledger, store, chunk=SMALL)
        read_back = 0
        for _ in _story(ledger):
            ViewRunner(store, store, [kept], batch_size=5).run()
            restarted = SearchView(ledger, store, name="search/restarted", chunk=SMALL)
            ViewRunner(store, store, [restarted], batch_size=4).run()
            read_back += restarted.read_back
        assert kept.read_back > 0  # chunks spanning batches read their earlier events back
        assert read_back > 0
        scratch = SearchView(ledger, store, name="search/scratch", chunk=SMALL)
        assert ViewRunner(store, store, [scratch]).run().failed == {}
        rows = _rows(store, "search/scratch")
        assert len(rows) == 8
        assert _rows(store, SEARCH_VIEW) == rows
        assert _rows(store, "search/restarted") == rows


def test_incremental_rows_are_byte_identical_to_a_rebuild(tmp_path):
    """Folding after every step, kept in memory or restarted each time, gives the rows one rebuild gives."""
    _incremental_equals_scratch(_sqlite(tmp_path))


def test_incremental_rows_are_byte_identical_to_a_rebuild_on_postgres(pg_url):
    """The same on PostgreSQL."""
    _incremental_equals_scratch(pg_url)


def test_two_shards_together_give_the_rows_of_one_run(tmp_path):
    """Shards 0 and 1 of 2 each sketch their sessions' chunks into the rows one unsharded run writes."""
    with _open(_sqlite(tmp_path)) as ledger:
        store = _store(ledger)
        shards = [SearchView(ledger, store, chunk=SMALL) for _ in range(2)]
        for _ in _story(ledger):
            for index, view in enumerate(shards):
                ViewRunner(store, store, [view], batch_size=3, shard=Shard(index, 2)).run()
        ViewRunner(store, store, [SearchView(ledger, store, name="whole", chunk=SMALL)]).run()
        owners = {Shard(0, 2).holds(key) for key in store.row_keys(SEARCH_VIEW)}
        assert owners == {True, False}
        assert _rows(store, SEARCH_VIEW) == _rows(store, "whole")


def test_a_session_whose_texts_cannot_be_read_fails_alone(tmp_path, monkeypatch):
    """An unreadable blob fails its session for that batch; other sessions' chunks still commit."""
    with _open(_sqlite(tmp_path)) as ledger:
        _grow(ledger, "x", 20)  # tool results in blobs
        ledger.start_session(session_id="y", system_prompt="small")
        for number in range(20):
            ledger.add_user_message("y", f"note {number}")
        store = _store(ledger)
        blobs = ledger.ports.blobs

        def unreadable(sha256: str) -> str:
            raise StoreError(f"blob {sha256} is gone")

        monkeypatch.setattr(blobs, "read_blob", unreadable)
        view = SearchView(ledger, store, chunk=SMALL)
        stats = ViewRunner(store, store, [view]).run()
        assert list(stats.failed) == ["x"]
        assert sorted(chunk_sketches(store, "y")) == [0]
        assert chunk_sketches(store, "x") == {}
        monkeypatch.undo()
        _grow(ledger, "x", 40)  # the open chunk is read back: chunk 1 is whole again
        assert ViewRunner(store, store, [view]).run().failed == {}
        assert view.read_back == 1
        scratch = SearchView(ledger, store, name="scratch", chunk=SMALL)
        ViewRunner(store, store, [scratch]).run()
        assert chunk_sketches(store, "x") == {1: chunk_sketches(store, "x", name="scratch")[1]}


@pytest.mark.parametrize("session", ["a", "c"])
def test_sketches_of_one_session_only(tmp_path, session):
    """A session's range read lists its own chunks, keyed by chunk index."""
    with _open(_sqlite(tmp_path)) as ledger:
        for _ in _story(ledger):
            pass
        _grow(ledger, "a0", 20)  # a session id extending another's
        store = _store(ledger)
        ViewRunner(store, store, [SearchView(ledger, store, chunk=SMALL)]).run()
        expected = {
            int(key.rpartition("/")[2]): store.load_row(SEARCH_VIEW, key)[1]
            for key in store.row_keys(SEARCH_VIEW)
            if key.rpartition("/")[0] == session
        }
        assert chunk_sketches(store, session) == expected
        assert len(expected) == ledger.version(session) // SMALL


@contextmanager
def _viewed(tmp_path: Path) -> Iterator[tuple[contextledger.Ledger, RecorderProjections]]:
    """A SQLite ledger of the whole story, with the search view's rows written by a runner (chunk SMALL)."""
    with _open(_sqlite(tmp_path)) as ledger:
        for _ in _story(ledger):
            pass
        store = _store(ledger)
        ViewRunner(store, store, [SearchView(ledger, store, chunk=SMALL)]).run()
        yield ledger, store


def test_text_index_reads_the_rows_a_runner_wrote(tmp_path, monkeypatch):
    """With the view's rows in place, a search builds no sketch from the log; without them it builds each."""
    monkeypatch.setattr(text_index, "CHUNK", SMALL)
    with _viewed(tmp_path) as (ledger, _):
        served = TextIndex(ledger)
        hits = [r.position for r in served.scan("a", "alpha2")]
        assert served.built == 0
        rebuilt = TextIndex(ledger, from_view=False)
        assert [r.position for r in rebuilt.scan("a", "alpha2")] == hits
        assert rebuilt.built == 3


def test_each_sketch_row_has_its_trigram_filter_row(tmp_path, monkeypatch):
    """The view writes, next to each chunk's sketch, the filter of that sketch; questions read them."""
    monkeypatch.setattr(text_index, "CHUNK", SMALL)
    with _viewed(tmp_path) as (ledger, store):
        sketches = _rows(store, SEARCH_VIEW)
        filters = _rows(store, SEARCH_VIEW + text_index.FILTERS)
        assert sketches
        assert sorted(filters) == sorted(sketches)
        for key, row in sketches.items():
            assert row is not None
            assert filters[key] == (row[0], text_index.trigram_filter(zlib.decompress(row[1])))
        served = TextIndex(ledger)
        assert [r.position for r in served.scan("a", "zzz-never")] == list(range(49, 54))
        assert (served.filtered, served.built) == (3, 0)
        assert ledger.ports.snapshots.load_snapshot(f"search/v{FORMAT}/a/0{text_index.FILTERS}") is None
