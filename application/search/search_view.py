"""The checkpointed search view: each full chunk's sketch and trigram filter, as ``TextIndex`` has them."""

from __future__ import annotations

from collections.abc import Sequence

from contextledger.application.kernel.ledger import Ledger
from contextledger.application.kernel.logs import get_logger
from contextledger.application.kernel.messages import SIDE_STREAM_SEPARATOR
from contextledger.application.search.text_index import (
    CHUNK,
    FILTERS,
    SEARCH_VIEW,
    chunk_key,
    event_words,
    stored_sketch,
    trigram_filter,
    word_list,
)
from contextledger.application.views.view_runner import Rows
from contextledger.domain.errors import ContextLedgerError
from contextledger.domain.ports import Notification, ProjectionRows

__all__ = ["SEARCH_VIEW", "SearchView", "chunk_key", "chunk_sketches"]

log = get_logger(__name__)


def chunk_sketches(store: ProjectionRows, session_id: str, *, name: str = SEARCH_VIEW) -> dict[int, bytes]:
    """Return the compressed word sketch of each full chunk of the session the view holds, by chunk index.

    A chunk missing here (a session not folded that far, or one that failed) is read from the log.
    """
    prefix = f"{session_id}/"
    found = store.load_range(name, prefix, f"{session_id}0")  # "0" follows "/": every key of the prefix
    return {
        int(key[len(prefix) :]): data
        for key, (_, data) in sorted(found.items())
        if key.startswith(prefix) and key[len(prefix) :].isdigit()
    }


class SearchView:
    """Writes a session's chunk sketch (and its trigram filter) when the chunk's last position arrives.

    Nothing is kept or computed per event: when a batch completes a chunk, the chunk's events are
    taken from the batch and the ones before it read back from the ledger (one range read), and
    their words sketched once. Sessions shorter than a chunk cost nothing: their open tail is
    scanned at query time, as ``TextIndex`` does.

    Args:
        ledger: Reads a chunk's earlier events and the blobs of its texts.
        store: The projection store (the view reads nothing back from it).
        name: The name of its rows.
        chunk: Positions per chunk (``TextIndex``'s).
    """

    def __init__(
        self, ledger: Ledger, store: ProjectionRows, *, name: str = SEARCH_VIEW, chunk: int = CHUNK
    ) -> None:
        """Keep the ledger and store; nothing is read until a chunk completes."""
        self.ledger = ledger
        self.store = store
        self.name = name
        self.chunk = chunk
        self.failed: dict[str, str] = {}
        self.read_back = 0
        """How many completed chunks had events before their batch (read back from the ledger)."""

    def begin(self, tracking: int) -> None:
        """Nothing to note: rows are never read back."""
        del tracking

    def fold(self, after: int, upto: int, batch: Sequence[Notification]) -> dict[str, Rows]:
        """Return the sketches of the chunks this batch completes; their filters under ``name + FILTERS``."""
        del after, upto
        completing: dict[str, dict[int, Notification]] = {}
        virtual = self.ledger.forks.virtual_position
        for note in batch:
            if SIDE_STREAM_SEPARATOR not in note.stream_id:  # a session's own stream (split_stream's kind "")
                position = virtual(note.stream_id, note.position, note.event)  # a fork's follow its parent's
                completing.setdefault(note.stream_id, {})[position] = note
        rows: Rows = {}
        filters: Rows = {}
        for session_id, notes in completing.items():
            if not any(p % self.chunk == 0 for p in notes):
                continue
            try:
                sketches, bits = self._completed(session_id, notes)
            except ContextLedgerError as error:
                self.failed[session_id] = str(error)
                log.warning("search_view_session_failed", view=self.name, session_id=session_id)
                continue
            rows.update(sketches)
            filters.update(bits)
        return {self.name: rows, self.name + FILTERS: filters} if rows else {self.name: rows}

    def _completed(self, session_id: str, by_position: dict[int, Notification]) -> tuple[Rows, Rows]:
        rows: Rows = {}
        filters: Rows = {}
        for end in sorted(p for p in by_position if p % self.chunk == 0):
            start = end - self.chunk
            first = end  # the batch's run of positions ending the chunk (a fork's first event stands apart)
            while first - 1 > start and first - 1 in by_position:
                first -= 1
            words: set[str] = set()
            if first > start + 1:
                self.read_back += 1
                for recorded in self.ledger.events(session_id, after=start, upto=first - 1):
                    words |= event_words(self.ledger, recorded.event)
            for position in range(first, end + 1):
                words |= event_words(self.ledger, by_position[position].event)
            key, sketch = chunk_key(session_id, end // self.chunk - 1), word_list(words)
            rows[key] = (end, stored_sketch(sketch))
            filters[key] = (end, trigram_filter(sketch))
        return rows, filters
