"""A coming batch's reads, started as it is read and run beside the fold: card facts rows and heads."""

from __future__ import annotations

from contextledger.application.kernel.aside import Ahead
from contextledger.application.kernel.fork import ForkAwareLog
from contextledger.application.rebuild.card_facts import CardFacts
from contextledger.application.views.view_runner import Rows
from contextledger.domain.ports import Notification

__all__ = ["BatchReads"]

Span = tuple[int, int]
"""A batch's notification ids ``(after, upto]``: the key of its reads."""


class BatchReads:
    """Reads of coming batches on threads of their own (``Ahead``), taken when each batch folds (ADR 0072).

    SQLite reads with the GIL released, and the page cache it resets after every commit is filled on
    the other core instead of the folding thread's. Each read returns one row (joined by SQLite).

    Args:
        log: The ledger's log (stored heads are read; a fork's are mapped to its positions when taken).
        cards: The card facts rows of the view, or None when its policy has no card.
    """

    def __init__(self, log: ForkAwareLog, cards: CardFacts | None) -> None:
        """Read nothing yet."""
        self.log = log
        self.cards = cards
        self._facts: dict[Span, tuple[frozenset[str], Ahead[Rows]]] = {}
        self._heads: dict[Span, Ahead[dict[str, int]]] = {}
        self.facts_written = False
        """Whether this catch-up wrote a card facts row (then none is read ahead: it could be stale)."""

    def begin(self) -> None:
        """Wait for and drop the reads of another catch-up's batches."""
        for _, read in self._facts.values():
            read.result()
        for heads in self._heads.values():
            heads.result()
        self._facts.clear()
        self._heads.clear()
        self.facts_written = False

    def start(self, span: Span, mains: list[Notification], *, heads: bool) -> None:
        """Start reading the batch's card facts rows and, with ``heads``, its sessions' stored heads.

        Card facts rows are read only while this catch-up has written none (a rebuild after a config change
        finds every fact kept): then no row read now can change before the batch folds. The keys are those
        of the events' stored positions; ``CardFacts.batch`` reads again when the batch needs another.
        """
        if not mains:
            return
        cards = self.cards
        if cards is not None and not self.facts_written:
            spans: dict[str, tuple[int, int]] = {}
            for note in mains:
                first = spans.get(note.stream_id)
                spans[note.stream_id] = (
                    (note.position, note.position) if first is None else (first[0], note.position)
                )
            keys = cards.keys(spans)
            self._facts[span] = (
                frozenset(keys),
                Ahead(lambda: cards.read(keys), name="contextledger-card-facts"),
            )
        if heads:
            sessions = list({note.stream_id: None for note in mains})
            stored = self.log.inner.versions  # a fork's link is learnt as it folds: mapped when taken
            self._heads[span] = Ahead(lambda: stored(sessions), name="contextledger-heads")

    def facts(self, span: Span) -> tuple[frozenset[str], Rows] | None:
        """The card facts rows read for the batch (their keys and rows), while none was written since."""
        pending = self._facts.pop(span, None)
        if pending is None:
            return None
        keys, read = pending
        rows = read.result()
        return None if self.facts_written else (keys, rows)

    def heads(self, span: Span) -> dict[str, int]:
        """The heads read for the batch's sessions, in their own positions (a fork's follow its parent's).

        A head that moved since it was read only keeps a state in memory; a session not named (one with
        only an artifact in the batch) is for the caller to read.
        """
        pending = self._heads.pop(span, None)
        return {} if pending is None else self.log.virtual_heads(pending.result())
