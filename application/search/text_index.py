"""A search projection: per chunk of positions, the distinct words of its texts, so a search skips chunks.

Finding where a text first entered a 1M-event log by reading every event takes tens of seconds.
Positions are immutable, so each full chunk of ``CHUNK`` positions gets, once, a word sketch: the
distinct casefolded words (runs of word characters) of its events' searchable texts, joined and
compressed, kept in the snapshot store (derived: lost or unreadable, it is rebuilt). A text query
can only match inside a chunk whose sketch contains every word of the query as a substring (the
query's first and last words may be parts of longer words), so only those chunks and the open tail
are read. Regular expressions and queries without a word character read every chunk.

Memory stays bounded by one chunk whatever the session's length (ADR 0040): a scan loads, tests and
drops each chunk's sketch in turn, keeps it compressed-then-raw ``bytes`` only while testing it (the
needles are matched as UTF-8 bytes: a substring of the UTF-8 of a word list is a substring of the
word list), and builds a missing sketch from one chunk's events.

A question does not read every sketch either (ADR 0050): each full chunk also has a trigram filter,
a bit per triple of byte classes found in its sketch (4 KiB raw, ~1 KiB compressed), read for the
whole session in one range read. A needle with a triple the filter lacks cannot be in the sketch,
so only the chunks whose filters hold every needle's triples have their sketches read.
"""

from __future__ import annotations

import re
import unicodedata
import zlib
from collections.abc import Iterator

from contextledger.application.kernel.ledger import Ledger
from contextledger.application.kernel.snapshots import SnapshotSlot
from contextledger.application.search.log_search import searchable_texts
from contextledger.domain.events import AnyEvent, Recorded

__all__ = [
    "CHUNK",
    "FILTERS",
    "SEARCH_VIEW",
    "TextIndex",
    "chunk_key",
    "event_words",
    "filter_may_match",
    "may_match",
    "needles",
    "stored_sketch",
    "trigram_filter",
    "word_list",
]

CHUNK = 4_096
"""Positions per sketched chunk."""

FORMAT = 3
"""Part of every sketch's name: raise it when the sketch's content changes (2: marks dropped, and the
texts of tool calls' arguments as read, ``argument_text``; 3: U+0131, the dotless i, folded to ``i``)."""

SEARCH_VIEW = f"search/v{FORMAT}"
"""The rows of the checkpointed search view (``SearchView``), one per full chunk; read before snapshots."""


FILTERS = "/trigrams"
"""Added to the view's name for the rows of its chunks' trigram filters (same keys as the sketches)."""


def chunk_key(session_id: str, chunk: int) -> str:
    """The key of a chunk's row in the search view: ``<session>/<chunk index, 8 digits>``."""
    return f"{session_id}/{chunk:08d}"


_WORD = re.compile(r"\w+")


def _decode(raw: bytes) -> bytes:
    try:
        return zlib.decompress(raw)
    except zlib.error as error:
        raise ValueError(str(error)) from error


_MARKS = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")
"""Combining marks: dropped from a folded text, on both sides, so a match never depends on them."""


def _folded(text: str) -> str:
    """A text as sketches and needles hold it: casefolded, then (when not ASCII) decomposed, marks dropped.

    Casefolding may add a combining mark that is no word character (``İ`` becomes ``i̇``), which split
    "İstanbul" into "i" and "stanbul", while a regular expression that ignores case matches "istanbul"
    there: a filter must never skip a chunk the match would find, so marks do not count at all. U+0131,
    the dotless i, casefolds to itself, yet a case-ignoring match takes it for ``i`` and ``I`` (the one
    such letter): it is folded to ``i`` (format 3).
    """
    folded = text.casefold()
    if folded.isascii():
        return folded
    return _MARKS.sub("", unicodedata.normalize("NFKD", folded.replace("\u0131", "i")))


def needles(query: str) -> list[bytes]:
    """The folded words of a text query as UTF-8: every one is in the sketch of a chunk that matches."""
    return [word.encode("utf-8") for word in _WORD.findall(_folded(query))]


def may_match(sketch: bytes, words: list[bytes]) -> bool:
    """Whether a chunk with this (uncompressed) sketch may hold a text with all ``words``."""
    return all(word in sketch for word in words)


def _words(text: str) -> set[str]:
    return set(_WORD.findall(_folded(text)))


def event_words(ledger: Ledger, event: AnyEvent) -> set[str]:
    """The distinct casefolded words of an event's searchable texts (blobs read through ``ledger``)."""
    words: set[str] = set()
    for text, tool in searchable_texts(ledger, event):
        words |= _words(text)
        if tool:
            words |= _words(tool)
    return words


def word_list(words: set[str]) -> bytes:
    """A chunk's uncompressed sketch: its sorted distinct words, one a line, as UTF-8."""
    return "\n".join(sorted(words)).encode("utf-8")


def stored_sketch(sketch: bytes) -> bytes:
    """A chunk's sketch as stored: its ``word_list`` compressed at level 1."""
    return zlib.compress(sketch, 1)


def _byte_classes() -> bytes:
    """64 classes of bytes: a-z (either case), 0-9 and _ each its own; every other byte one of 27."""
    classes = bytearray(37 + byte % 27 for byte in range(256))
    for offset, first in ((0, ord("a")), (0, ord("A")), (26, ord("0"))):
        for i in range(10 if offset else 26):
            classes[first + i] = offset + i
    classes[ord("_")] = 36
    return bytes(classes)


_CLASSES = _byte_classes()
_FILTER_BYTES = 64**3 // 8


def _triples(data: bytes) -> set[int]:
    """The bit numbers of the byte-class triples at every place of ``data`` (none if shorter than 3)."""
    t = data.translate(_CLASSES)
    return {a << 12 | b << 6 | c for a, b, c in set(zip(t, t[1:], t[2:], strict=False))}


def trigram_filter(sketch: bytes) -> bytes:
    """A chunk's filter, compressed: the bit of every byte-class triple of its uncompressed ``sketch``."""
    bits = bytearray(_FILTER_BYTES)
    for i in _triples(sketch):
        bits[i >> 3] |= 1 << (i & 7)
    return zlib.compress(bytes(bits), 1)


def filter_may_match(bits: bytes, triples: set[int]) -> bool:
    """Whether an (uncompressed) filter holds every needle triple: False means the sketch cannot match.

    Every substring of the sketch has its triples in the filter, so a needle with a missing one is
    not in the sketch. ``triples``: the union of ``_triples`` of every needle.
    """
    return all(bits[i >> 3] >> (i & 7) & 1 for i in triples)


def _filter_bits(stored: bytes | None) -> bytes | None:
    """A stored filter uncompressed, or None when there is none or it is unreadable (derived: rebuilt)."""
    if stored is None:
        return None
    try:
        bits = _decode(stored)
    except ValueError:
        return None
    return bits if len(bits) == _FILTER_BYTES else None


class TextIndex:
    """Chunk word sketches of a ledger's sessions, built on first use and kept in the snapshot store."""

    def __init__(self, ledger: Ledger, *, from_view: bool = True) -> None:
        """Read sketches from the search view's rows (unless ``from_view`` is False), else the snapshots."""
        self.ledger = ledger
        self._from_view_rows = from_view
        self._slot = SnapshotSlot(ledger.ports.snapshots)
        self.built = 0
        """How many chunk sketches this index built (read from the log) rather than loaded."""
        self.filtered = 0
        """How many chunks a trigram filter ruled out without their sketch being read."""

    def scan(self, session_id: str, query: str, *, regex: bool = False) -> Iterator[Recorded]:
        """Yield, in order, the events of every chunk that may hold ``query`` (a superset of the matches)."""
        head = self.ledger.version(session_id)
        words = [] if regex else needles(query)
        triples = {i for word in words for i in _triples(word)}
        full = head // CHUNK
        filters = self._view_filters(session_id) if triples else {}
        for chunk in range(full):
            if words and not self._may_hold(session_id, chunk, words, triples, filters.get(chunk)):
                continue
            yield from self.ledger.events(session_id, after=chunk * CHUNK, upto=(chunk + 1) * CHUNK)
        if full * CHUNK < head:
            yield from self.ledger.events(session_id, after=full * CHUNK, upto=head)

    def _may_hold(
        self, session_id: str, chunk: int, words: list[bytes], triples: set[int], stored: bytes | None
    ) -> bool:
        """Whether the chunk may hold every word: its filter first (when it has one), then its sketch."""
        name = f"search/v{FORMAT}/{session_id}/{chunk}{FILTERS}"
        upto = (chunk + 1) * CHUNK
        if triples and stored is None:
            found = self._slot.load(name, bytes, lambda _, at: at == upto)
            stored = None if found is None else found[1]
        bits = _filter_bits(stored)
        if bits is not None and not filter_may_match(bits, triples):
            self.filtered += 1
            return False
        sketch = self._sketch(session_id, chunk)
        if triples and bits is None:
            self._slot.save(name, upto, trigram_filter(sketch))
        return may_match(sketch, words)

    def _view_filters(self, session_id: str) -> dict[int, bytes]:
        """The compressed trigram filters of the full chunks that the search view holds, by chunk."""
        views = self.ledger.ports.projections if self._from_view_rows else None
        if views is None:
            return {}
        prefix = f"{session_id}/"
        found = views.load_range(SEARCH_VIEW + FILTERS, prefix, f"{session_id}0")  # "0" follows "/"
        filters: dict[int, bytes] = {}
        for key, (upto, data) in found.items():
            index = key[len(prefix) :]
            if key.startswith(prefix) and index.isdigit() and upto == (int(index) + 1) * CHUNK:
                filters[int(index)] = data
        return filters

    def _from_view(self, session_id: str, chunk: int, upto: int) -> tuple[int, bytes] | None:
        """The chunk's sketch from the search view's row, when a runner has written it."""
        views = self.ledger.ports.projections if self._from_view_rows else None
        row = None if views is None else views.load_row(SEARCH_VIEW, chunk_key(session_id, chunk))
        if row is None or row[0] != upto:
            return None
        try:
            return upto, _decode(row[1])
        except ValueError:
            return None  # derived: an unreadable row only means building the sketch again

    def _sketch(self, session_id: str, chunk: int) -> bytes:
        """The chunk's uncompressed sketch: from the view, else the snapshot, else built (and saved)."""
        name = f"search/v{FORMAT}/{session_id}/{chunk}"
        upto = (chunk + 1) * CHUNK
        found = self._from_view(session_id, chunk, upto) or self._slot.load(
            name, _decode, lambda _, at: at == upto
        )
        if found is not None:
            return found[1]
        words: set[str] = set()
        for recorded in self.ledger.events(session_id, after=chunk * CHUNK, upto=upto):
            words |= event_words(self.ledger, recorded.event)
        sketch = word_list(words)
        self._slot.save(name, upto, stored_sketch(sketch))
        self.built += 1
        return sketch
