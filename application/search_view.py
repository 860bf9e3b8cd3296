"""The checkpointed search view: each full chunk's word sketch per session, as ``TextIndex`` builds it."""

from __future__ import annotations

import zlib
from collections import OrderedDict
from collections.abc import Sequence

import structlog
from contextledger.application.ledger import Ledger
from contextledger.application.search import event_texts
from contextledger.application.text_index import CHUNK, _words
from contextledger.application.view_runner import Rows
from contextledger.domain.errors import ContextLedgerError
from contextledger.domain.events import AnyEvent
from contextledger.domain.ports import Notification, ProjectionStore

__all__ = ["SEARCH_VIEW", "SearchView", "chunk_key", "chunk_sketches"]

log = structlog.get_logger(__name__)

SEARCH_VIEW = "search/v1"
"""The name of the view's rows (one per full chunk, keyed ``<session>/<chunk:08d>``)."""

_DIGITS = 8


def chunk_key(session_id: str, chunk: int) -> str:
    """The key of a chunk's row: ``<session>/<chunk index, 8 digits>``."""
    return f"{session_id}/{chunk:0{_DIGITS}d}"


def chunk_sketches(store: ProjectionStore, session_id: str, *, name: str = SEARCH_VIEW) -> dict[int, bytes]:
    """Return the compressed word sketch of each full chunk of the session the view holds, by chunk index.

    A chunk missing here (a session not folded that far, or one that failed) is read from the log.
    """
    prefix = f"{session_id}/"
    found = store.load_range(name, prefix, prefix + "9" * _DIGITS)
    return {
        int(key[len(prefix) :]): data
        for key, (_, data) in sorted(found.items())
        if key.startswith(prefix) and key[len(prefix) :].isdigit()
    }


def _sketch(words: set[str]) -> bytes:
    # TextIndex's sketch: the sorted distinct words, one a line, compressed at level 1.
    return zlib.compress("\n".join(sorted(words)).encode("utf-8"), 1)


class _Open:
    """The words of a session's open chunk up to position ``last`` (not a multiple of the chunk size)."""

    __slots__ = ("last", "words")

    def __init__(self, last: int, words: set[str]) -> None:
        self.last = last
        self.words = words


class SearchView:
    """Writes each full chunk's word sketch once, when a batch completes the chunk.

    The open chunk's words are kept in memory (up to ``max_open`` sessions); a session whose open
    chunk is not in memory (after a restart, or evicted) reads that chunk's events so far back from
    the ledger. Sessions shorter than a chunk have no rows: the open tail is scanned at query time.

    Args:
        ledger: Reads the texts of events (blobs) and open chunks back.
        store: Where the rows go.
        name: The name of the rows and checkpoint (another name builds a second copy beside it).
        chunk: Positions per chunk (``TextIndex``'s ``CHUNK``; another size only for tests).
        max_open: Sessions whose open chunk's words are kept in memory.
    """

    def __init__(
        self,
        ledger: Ledger,
        store: ProjectionStore,
        *,
        name: str = SEARCH_VIEW,
        chunk: int = CHUNK,
        max_open: int = 1_024,
    ) -> None:
        """Keep the ledger and store; nothing is read until the first batch."""
        self.ledger = ledger
        self.store = store
        self.name = name
        self.chunk = chunk
        self.failed: dict[str, str] = {}
        self.read_back = 0
        """How many times an open chunk was read back from the ledger."""
        self._max_open = max_open
        self._open: OrderedDict[str, _Open] = OrderedDict()

    def begin(self, tracking: int) -> None:
        """Nothing to note: rows are never read back (open chunks come from memory or the ledger)."""
        del tracking

    def fold(self, after: int, upto: int, batch: Sequence[Notification]) -> dict[str, Rows]:
        """Add a batch's session events to their open chunks; return the sketches of the chunks completed."""
        del after, upto
        touched: dict[str, list[Notification]] = {}
        for note in batch:
            if "::" not in note.stream_id:
                touched.setdefault(note.stream_id, []).append(note)
        rows: Rows = {}
        for session_id, notes in touched.items():
            try:
                rows.update(self._fold_session(session_id, notes))
            except ContextLedgerError as error:
                self._open.pop(session_id, None)
                self.failed[session_id] = str(error)
                log.warning("search_view_session_failed", view=self.name, session_id=session_id)
        return {self.name: rows}

    def _fold_session(self, session_id: str, notes: list[Notification]) -> Rows:
        rows: Rows = {}
        state = self._open.pop(session_id, None)
        for note in notes:
            position = note.position
            # Not right after what memory holds (a restart, an eviction, a batch whose commit failed
            # and comes again): the open chunk's events before this one are read back.
            if state is None or state.last != position - 1:
                state = self._read_back(session_id, position)
            self._add(state.words, note.event)
            state.last = position
            if position % self.chunk == 0:
                rows[chunk_key(session_id, position // self.chunk - 1)] = (position, _sketch(state.words))
                state = None
        if state is not None:
            self._open[session_id] = state
            while len(self._open) > self._max_open:
                self._open.popitem(last=False)
        return rows

    def _read_back(self, session_id: str, position: int) -> _Open:
        """The open chunk of ``position`` with the words of its events before ``position``."""
        start = (position - 1) // self.chunk * self.chunk
        words: set[str] = set()
        if position - 1 > start:
            self.read_back += 1
            for recorded in self.ledger.events(session_id, after=start, upto=position - 1):
                self._add(words, recorded.event)
        return _Open(position - 1, words)

    def _add(self, words: set[str], event: AnyEvent) -> None:
        for text, tool in event_texts(self.ledger, event):
            words |= _words(text)
            if tool:
                words |= _words(tool)
