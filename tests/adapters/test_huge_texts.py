"""Huge texts: tiktoken counts in bounded chunks, on the safe side of the exact count and within tolerance."""

from __future__ import annotations

import itertools

import pytest
from contextledger.adapters import tokenizers
from contextledger.adapters.tokenizers import FORCED_SPLIT_MARGIN, TiktokenCounter, chunk_bounds, get_counter
from hypothesis import given, settings
from hypothesis import strategies as st

ENCODING = get_counter("cl100k_base")._encoding  # type: ignore[attr-defined]  # the wrapped tiktoken Encoding


def exact(text: str) -> int:
    """cl100k over the whole text at once (what the chunked count must bound)."""
    return len(ENCODING.encode_ordinary(text))


def forced_splits(text: str, chunk_chars: int) -> int:
    """How many chunk boundaries of ``text`` fell inside a word."""
    return sum(forced for _, _, forced in chunk_bounds(text, chunk_chars))


class SpyEncoding:
    """A tiktoken encoding that records the longest text it was handed."""

    def __init__(self) -> None:
        self.longest = 0

    def encode_ordinary(self, text: str) -> list[int]:
        self.longest = max(self.longest, len(text))
        return ENCODING.encode_ordinary(text)

    def encode_ordinary_batch(self, texts: list[str], num_threads: int = 1) -> list[list[int]]:
        self.longest = max([self.longest, *map(len, texts)])
        return ENCODING.encode_ordinary_batch(texts, num_threads=num_threads)


def test_chunk_bounds_cover_the_text_in_bounded_spans():
    """Spans are contiguous, at most a chunk long, at least half a chunk except the last.

    A span that was not forced ends at a line or word boundary.
    """
    text = ("word " * 3 + "x" * 300 + "\nLine two, with words.\n") * 200
    spans = list(chunk_bounds(text, 128))
    assert spans[0][0] == 0
    assert spans[-1][1] == len(text)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))
    assert all(end - start <= 128 for start, end, _ in spans)
    assert all(end - start >= 64 for start, end, _ in spans[:-1])
    for _, end, forced in spans[:-1]:
        if not forced:
            assert (text[end - 1] == "\n" and text[end].isalnum()) or (
                text[end] == " " and text[end + 1].isalpha()
            )
    assert any(forced for *_, forced in spans)
    assert any(not forced for *_, forced in spans[:-1])


def test_a_short_text_is_one_span():
    """Texts up to a chunk are counted whole."""
    assert list(chunk_bounds("hello", 16)) == [(0, 5, False)]
    with pytest.raises(tokenizers.TokenizerError):
        list(chunk_bounds("hello", 4))


def test_tiktoken_is_never_handed_more_than_a_chunk():
    """A 2 MB text (prose, or one repeated character) reaches tiktoken in pieces of at most a chunk."""
    spy = SpyEncoding()
    counter = TiktokenCounter(spy, "cl100k_base", chunk_chars=4096)
    for text in ("The quick brown fox jumps over the lazy dog.\n" * 45_000, "a" * 2_000_000):
        assert counter.count(text) >= exact(text)
        assert counter.count_many(["short", text])[1] == counter.count(text)
    assert 0 < spy.longest <= 4096


def test_line_and_word_splits_are_exact_on_the_real_transcripts(transcripts):
    """Where every boundary is a line or word boundary, the chunked count equals cl100k exactly.

    Elsewhere it stays at or above it, within 2 * FORCED_SPLIT_MARGIN per forced boundary.
    """
    exact_files = 0
    for path in sorted(transcripts.iterdir()):
        text = path.read_text(encoding="utf-8", errors="replace")[:400_000]
        counter = TiktokenCounter(ENCODING, "cl100k_base", chunk_chars=2048)
        chunked, true, forced = counter.count(text), exact(text), forced_splits(text, 2048)
        assert true <= chunked <= true + 2 * FORCED_SPLIT_MARGIN * forced, path.name
        exact_files += forced == 0
    assert exact_files >= 5  # most files: a line or word boundary in every window


def test_one_repeated_character_is_counted_on_the_safe_side():
    """A run of one character (tiktoken's worst case: one giant piece) stays above the exact count."""
    for text in ("a" * 300_000, "=" * 300_000, " " * 300_000, "7" * 300_000, "日" * 100_000, "ab" * 150_000):
        counter = TiktokenCounter(ENCODING, "cl100k_base", chunk_chars=8192)
        chunked, true = counter.count(text), exact(text)
        assert true <= chunked <= true + 2 * FORCED_SPLIT_MARGIN * forced_splits(text, 8192)


ALPHABETS = st.sampled_from(
    [
        "ab",
        "aA1",
        "a ",
        "abc \n",
        " \n\t",
        "0123456789.,",
        '{}[]":, ',
        "x'sdtlm ",
        "日本語 a",
        "é🙂a ",
        "-=_/",
        "\r\nab ",
        "abcdefghijklmnopqrstuvwxyz ,.\n",
    ]
)


@settings(max_examples=400, deadline=None)
@given(data=st.data(), chunk_chars=st.integers(min_value=16, max_value=96))
def test_chunked_count_is_never_below_the_exact_count(data, chunk_chars):
    """Property: for any text and chunk size, exact <= chunked <= exact + 2 * margin * forced boundaries."""
    alphabet = data.draw(ALPHABETS)
    text = data.draw(st.text(alphabet=alphabet, min_size=0, max_size=600))
    counter = TiktokenCounter(ENCODING, "cl100k_base", chunk_chars=chunk_chars)
    chunked, true = counter.count(text), exact(text)
    forced = forced_splits(text, chunk_chars)
    assert true <= chunked <= true + 2 * FORCED_SPLIT_MARGIN * forced
    if forced == 0:
        assert chunked == true


@settings(max_examples=200, deadline=None)
@given(
    words=st.lists(st.text(alphabet="abcXYZ019_.,'\"{}é日🙂", min_size=1, max_size=12), max_size=120),
    separators=st.lists(st.sampled_from([" ", "\n", "\n\n", "  ", "\t", ", ", "\r\n"]), min_size=1),
    chunk_chars=st.integers(min_value=16, max_value=64),
)
def test_chunked_count_of_word_salad_is_exact_at_safe_splits(words, separators, chunk_chars):
    """Property over word-like text: the bound holds, and a count whose splits were all safe is exact."""
    text = "".join(w + separators[i % len(separators)] for i, w in enumerate(words))
    counter = TiktokenCounter(ENCODING, "cl100k_base", chunk_chars=chunk_chars)
    chunked, true = counter.count(text), exact(text)
    forced = forced_splits(text, chunk_chars)
    assert true <= chunked <= true + 2 * FORCED_SPLIT_MARGIN * forced
    assert forced or chunked == true
