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
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator

from contextledger.application.kernel.ledger import Ledger
from contextledger.application.kernel.snapshots import SnapshotSlot
from contextledger.application.search.log_search import searchable_texts
from contextledger.domain.events import AnyEvent, Recorded

__all__ = [
    "CHUNK",
    "SEARCH_VIEW",
    "TextIndex",
    "chunk_key",
    "event_words",
    "may_match",
    "needles",
    "sketch_bytes",
]

CHUNK = 4_096
"""Positions per sketched chunk."""

FORMAT = 1
"""Part of every sketch's name: raise it when the sketch's content changes."""

SEARCH_VIEW = "search/v1"
"""The rows of the checkpointed search view (``SearchView``), one per full chunk; read before snapshots."""


def chunk_key(session_id: str, chunk: int) -> str:
    """The key of a chunk's row in the search view: ``<session>/<chunk index, 8 digits>``."""
    return f"{session_id}/{chunk:08d}"


_WORD = re.compile(r"\w+")


def _decode(raw: bytes) -> bytes:
    try:
        return zlib.decompress(raw)
    except zlib.error as error:
        raise ValueError(str(error)) from error


def needles(query: str) -> list[bytes]:
    """The casefolded words of a text query as UTF-8: every one is in the sketch of a chunk that matches."""
    return [word.casefold().encode("utf-8") for word in _WORD.findall(query)]


def may_match(sketch: bytes, words: list[bytes]) -> bool:
    """Whether a chunk with this (uncompressed) sketch may hold a text with all ``words``."""
    return all(word in sketch for word in words)


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.casefold()))


def event_words(ledger: Ledger, event: AnyEvent) -> set[str]:
    """The distinct casefolded words of an event's searchable texts (blobs read through ``ledger``)."""
    words: set[str] = set()
    for text, tool in searchable_texts(ledger, event):
        words |= _words(text)
        if tool:
            words |= _words(tool)
    return words


def sketch_bytes(words: set[str]) -> bytes:
    """A chunk's stored sketch: its sorted distinct words, one a line, compressed at level 1."""
    return zlib.compress("\n".join(sorted(words)).encode("utf-8"), 1)


class TextIndex:
    """Chunk word sketches of a ledger's sessions, built on first use and kept in the snapshot store."""

    def __init__(self, ledger: Ledger, *, from_view: bool = True) -> None:
        """Read sketches from the search view's rows (unless ``from_view`` is False), else the snapshots."""
        self.ledger = ledger
        self._from_view_rows = from_view
        self._slot = SnapshotSlot(ledger.ports.snapshots)
        self.built = 0
        """How many chunk sketches this index built (read from the log) rather than loaded."""

    def scan(self, session_id: str, query: str, *, regex: bool = False) -> Iterator[Recorded]:
        """Yield, in order, the events of every chunk that may hold ``query`` (a superset of the matches)."""
        head = self.ledger.version(session_id)
        words = [] if regex else needles(query)
        full = head // CHUNK
        for chunk in range(full):
            if words and not may_match(self._sketch(session_id, chunk), words):
                continue
            yield from self.ledger.events(session_id, after=chunk * CHUNK, upto=(chunk + 1) * CHUNK)
        if full * CHUNK < head:
            yield from self.ledger.events(session_id, after=full * CHUNK, upto=head)

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
        raw = sketch_bytes(words)
        self._slot.save(name, upto, raw)
        self.built += 1
        return zlib.decompress(raw)
