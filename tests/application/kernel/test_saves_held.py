"""Counts made in ``saves_held`` blocks are written once, when the last block ends: a long fold, one write."""

from __future__ import annotations

import threading

import contextledger
import pytest
from contextledger.adapters.tokenizers import get_counter
from contextledger.application.kernel import token_cache
from contextledger.application.kernel.token_cache import CachedTokenCounter
from contextledger.application.render.renderer import Renderer
from contextledger.domain.content import InlineText, content_address

from tests.adapters.test_token_cache_batches import RecordingStore


def _cache(store: RecordingStore) -> CachedTokenCounter:
    return CachedTokenCounter(get_counter("heuristic"), store, blobs=None)  # type: ignore[arg-type]


def test_counts_made_in_a_block_are_written_in_one_write_when_it_ends():
    """Inside the block nothing is written; at its end every fresh count is, in one write."""
    store = RecordingStore()
    cache = _cache(store)
    with cache.saves_held():
        cache.count_texts([InlineText("one"), InlineText("two")])
        cache.count("a card\nof three lines\nand more")
        cache.count_many(["three", "one"])
        assert store.writes == 0
    assert store.writes == 1
    texts = ["one", "two", "a card\nof three lines\nand more", "three"]
    assert {k for _, k in store.rows} == {content_address(t) for t in texts}
    cache.count("four")  # outside a block: written at once, as before
    assert store.writes == 2


def test_blocks_on_two_threads_write_once_when_the_last_ends():
    """Blocks nest across threads: the first to end writes nothing, the last writes what both counted."""
    store = RecordingStore()
    cache = _cache(store)
    entered, first_done = threading.Event(), threading.Event()

    def other() -> None:
        with cache.saves_held():
            cache.count("from the other thread")
            entered.set()
            assert first_done.wait(30)
        # this block ended last

    thread = threading.Thread(target=other)
    with cache.saves_held():
        thread.start()
        assert entered.wait(30)
        cache.count("from this thread")
    assert store.writes == 0  # the other block still runs
    first_done.set()
    thread.join(30)
    assert store.writes == 1
    assert len(store.rows) == 2


def test_a_block_that_raises_writes_nothing_and_the_next_writes_its_counts():
    """A failed fold leaves its counts in memory; the next block that ends writes them with its own."""
    store = RecordingStore()
    cache = _cache(store)

    def failing_fold() -> None:
        with cache.saves_held():
            cache.count("counted, then the fold failed")
            raise RuntimeError("the fold failed")

    with pytest.raises(RuntimeError, match="the fold failed"):
        failing_fold()
    assert store.writes == 0
    with cache.saves_held():
        cache.count("the next fold")
    assert store.writes == 1
    assert len(store.rows) == 2


def test_under_deferred_saves_a_block_leaves_the_writing_to_flush():
    """A rebuild or a simulation (``defer_saves``) writes when it flushes, not when a block ends."""
    store = RecordingStore()
    cache = _cache(store)
    cache.defer_saves = True
    with cache.saves_held():
        cache.count("kept for the flush")
    assert store.writes == 0
    cache.flush()
    assert store.writes == 1


def test_a_long_block_writes_a_batch_of_counts_at_a_time(monkeypatch):
    """Held counts are bounded: once ``UNSAVED_COUNTS`` wait, they are written, so memory stays flat."""
    monkeypatch.setattr(token_cache, "UNSAVED_COUNTS", 3)
    store = RecordingStore()
    cache = _cache(store)
    with cache.saves_held():
        cache.count_many(["a", "b"])
        assert store.writes == 0
        cache.count_many(["c"])
        assert (store.writes, len(store.rows)) == (1, 3)
        cache.count_many(["d"])
    assert (store.writes, len(store.rows)) == (2, 4)


def test_a_render_from_scratch_under_pressure_writes_its_counts_once():
    """A session folded through many compactions (a new card counted at each) writes its counts in one go.

    Before, each fresh count was one write: the events' texts chunk by chunk, and every card of every
    compaction alone.
    """
    ledger = contextledger.open_ledger("memory://")
    session = ledger.start_session(system_prompt="You are a coding agent.")
    for call in range(120):
        ledger.add_user_message(session, f"step {call}: read the next file, then decide")
        ledger.add_assistant_message(
            session, f"Reading file {call}.", tool_calls=[{"id": f"c{call}", "name": "read_file"}]
        )
        ledger.add_tool_result(session, f"c{call}", f"line {call}\n" + f"x{call} = {call} * 2\n" * 60)
    store = ledger.ports.token_counts
    saves = 0
    save = store.save_token_counts

    def counted_save(tokenizer, counts):
        nonlocal saves
        saves += 1
        save(tokenizer, counts)

    store.save_token_counts = counted_save  # type: ignore[method-assign]
    renderer = Renderer(ledger, tokenizer="heuristic", snapshots=False)
    context = renderer.render(session, contextledger.get_preset("default"), budget=2_000)
    state = next(iter(renderer._states.values())).state
    assert state.compactions >= 10
    assert context.tokens <= context.budget
    assert saves == 2  # the fresh state's placeholder count, then everything the fold counted
    again = Renderer(ledger, tokenizer="heuristic", snapshots=False)
    assert again.render(session, contextledger.get_preset("default"), budget=2_000) == context
    assert again.counter.tokenized == 0  # every count was written
