"""Batched token-cache counting (one hash per distinct text, one save per batch) equals one by one."""

from __future__ import annotations

import threading

import contextledger
import pytest
from contextledger.adapters.tokenizers import get_counter
from contextledger.application.kernel.token_cache import CachedTokenCounter
from contextledger.domain.content import BlobText, InlineText, Text
from contextledger.domain.errors import StoreError
from hypothesis import given, settings
from hypothesis import strategies as st

_WORDS = st.sampled_from(["alpha", "beta", " gamma", "\n", "δ", "🙂", "  ", "x=1;", "<|endoftext|>", ""])
_TEXTS = st.lists(_WORDS, max_size=8).map("".join)


class RecordingStore:
    """A TokenCountStore in memory that records each write."""

    def __init__(self, *, aside: bool = False) -> None:
        self.rows: dict[tuple[str, str], int] = {}
        self.writes = 0
        self.writes_aside = aside

    def load_token_counts(self, tokenizer, keys):
        return {k: self.rows[tokenizer, k] for k in keys if (tokenizer, k) in self.rows}

    def save_token_counts(self, tokenizer, counts):
        self.writes += 1
        for key, value in counts.items():
            self.rows.setdefault((tokenizer, key), value)


@settings(max_examples=60, deadline=None)
@given(
    batches=st.lists(st.lists(_TEXTS, max_size=12), min_size=1, max_size=4),
    defer=st.booleans(),
    limits=st.sampled_from([(3, 1 << 25), (200_000, 8), (200_000, 1 << 25)]),
    at_least=st.sampled_from([1, 4, 10**6]),
    aside=st.booleans(),
)
def test_batched_counts_equal_counting_each_text_alone(batches, defer, limits, at_least, aside):
    """Repeated texts, small or large memory (entries, characters), saves deferred (grouped, aside) or not."""
    memory_limit, text_chars = limits
    plain = get_counter("cl100k_base")
    store = RecordingStore(aside=aside)
    cache = CachedTokenCounter(
        plain,
        store,  # type: ignore[arg-type]
        blobs=None,  # type: ignore[arg-type]
        memory_limit=memory_limit,
        text_chars=text_chars,
    )
    cache.defer_saves = defer
    for batch in batches:
        assert cache.count_texts([InlineText(t) for t in batch]) == [plain.count(t) for t in batch]
        cache.flush(at_least=at_least, aside=True)
    cache.flush()
    distinct = {t for batch in batches for t in batch}
    assert {k: v for (_, k), v in store.rows.items()} == {
        contextledger.domain.content.content_address(t): plain.count(t) for t in distinct
    }
    again = CachedTokenCounter(plain, store, blobs=None)  # type: ignore[arg-type]
    assert again.count_texts([InlineText(t) for t in sorted(distinct)]) == [
        plain.count(t) for t in sorted(distinct)
    ]
    assert again.tokenized == 0


def test_deferred_counts_are_written_once_at_flush(tmp_path):
    """With ``defer_saves`` fresh counts (inline and blob) reach the store in one write, at ``flush``."""
    store = RecordingStore()
    with contextledger.open_ledger(f"sqlite:///{tmp_path / 'l.db'}") as ledger:
        sid = ledger.start_session()
        ledger.add_assistant_message(sid, tool_calls=[{"id": "c", "name": "cat"}])
        ledger.add_tool_result(sid, "c", "word " * 10_000)
        blob = ledger.events(sid)[-1].event.content
        assert isinstance(blob, BlobText)
        cache = CachedTokenCounter(get_counter("cl100k_base"), store, ledger.ports.blobs)
        cache.defer_saves = True
        texts: list[Text] = [InlineText("a b"), blob, InlineText("a b")]
        first = cache.count_texts(texts)
        second = cache.count_texts([InlineText("c"), blob])
        assert store.writes == 0
        cache.flush()
        cache.flush()
    assert store.writes == 1
    plain = get_counter("cl100k_base")
    assert first == [plain.count("a b"), plain.count("word " * 10_000), plain.count("a b")]
    assert second == [plain.count("c"), first[1]]
    assert len(store.rows) == 3


def test_a_flush_with_at_least_waits_for_that_many_counts():
    """``flush(at_least=n)`` writes nothing while fewer than n counts wait, then all of them in one write."""
    store = RecordingStore()
    cache = CachedTokenCounter(get_counter("cl100k_base"), store, blobs=None)  # type: ignore[arg-type]
    cache.defer_saves = True
    cache.count_texts([InlineText("one"), InlineText("two")])
    cache.flush(at_least=3)
    assert store.writes == 0
    cache.count_texts([InlineText("three"), InlineText("one")])
    cache.flush(at_least=3)
    assert (store.writes, len(store.rows)) == (1, 3)
    cache.flush()
    assert store.writes == 1  # nothing was left


def test_a_write_aside_lands_before_the_next_and_its_error_is_raised_once():
    """``flush(aside=True)`` writes on its own thread, one write at a time; a plain flush waits for it.

    A failed write aside raises from the next flush, once; the counts it held are counted again.
    """
    store = RecordingStore(aside=True)
    started, release = threading.Event(), threading.Event()
    save = store.save_token_counts

    def slow(tokenizer, counts):
        started.set()
        assert release.wait(30)
        if "boom" in counts:
            raise StoreError("the disk is full")
        save(tokenizer, counts)

    store.save_token_counts = slow
    plain = get_counter("cl100k_base")
    cache = CachedTokenCounter(plain, store, blobs=None)  # type: ignore[arg-type]
    cache.defer_saves = True
    cache.count_texts([InlineText("one"), InlineText("two")])
    cache.flush(aside=True)
    assert started.wait(30)
    assert store.writes == 0  # still writing, the caller went on
    cache.count_texts([InlineText("three")])
    release.set()
    cache.flush()  # waits for the first write, then writes the second
    assert store.writes == 2
    assert len(store.rows) == 3
    cache._unsaved["boom"] = 1
    cache.flush(aside=True)
    with pytest.raises(StoreError, match="disk is full"):
        cache.flush()
    cache.flush()  # raised once
