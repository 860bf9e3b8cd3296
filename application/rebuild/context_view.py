"""The context view: each session's render state under one policy, budget and tokenizer, batch by batch."""

from __future__ import annotations

from collections.abc import Sequence

from contextledger.application.kernel.ledger import Ledger
from contextledger.application.kernel.logs import get_logger
from contextledger.application.kernel.messages import SIDE_STREAM_SEPARATOR
from contextledger.application.kernel.summary_log import SUMMARIES_KIND
from contextledger.application.kernel.token_cache import UNSAVED_COUNTS
from contextledger.application.rebuild.batch_reads import BatchReads
from contextledger.application.rebuild.card_facts import CardFacts
from contextledger.application.rebuild.render_digest import (
    RenderDigest,
    digests_of,
    encode_digest,
    failed_digest,
    state_digest,
)
from contextledger.application.render.context_versions import projection_version
from contextledger.application.render.renderer import Renderer
from contextledger.application.views.token_rows import TokenRows
from contextledger.application.views.view_runner import (
    KnownRows,
    Rows,
    Shard,
)
from contextledger.domain.content import Text
from contextledger.domain.errors import ContextLedgerError
from contextledger.domain.events import Recorded, SessionStarted, SummaryRecorded
from contextledger.domain.ports import (
    Notification,
    ProjectionStore,
    TokenCounter,
)
from contextledger.projections.counting import CountedEvent, counted_texts
from contextledger.projections.policy import Policy

__all__ = ["ContextView"]

log = get_logger(__name__)

_Missing = list[tuple[list[CountedEvent], int, Notification, int]]
"""Session events without token rows: their list of events, the place in it, the notification, position."""


class ContextView:
    """Folds every session's render state with the Renderer's own fold into one row per session.

    Summary artifacts come from the ``<session>::summaries`` notifications of the same batches;
    token counts from the per-event token rows (written as events are first counted).

    Args:
        ledger: The ledger whose sessions are folded (events before a batch, blobs, forks).
        store: Where the view's rows (read back after a restart) and the token rows are.
        policy: A preset name or ``Policy``.
        budget: Prompt budget override.
        tokenizer: Tokenizer name or counter.
        projection: The version name (default: ``projection_version`` of the projector).
        max_states: Folded states kept in memory (others are reloaded from their rows).
        shard: The share of the sessions this view folds (names its token rows).
    """

    def __init__(
        self,
        ledger: Ledger,
        store: ProjectionStore,
        *,
        policy: Policy | str = "default",
        budget: int | None = None,
        tokenizer: str | TokenCounter = "cl100k_base",
        projection: str | None = None,
        max_states: int = 8_192,
        shard: Shard | None = None,
    ) -> None:
        """Build the projector; nothing is read until the first batch."""
        self.store = store
        self.renderer = Renderer(ledger, tokenizer=tokenizer, max_states=max_states, snapshots=False)
        self.projector = self.renderer.projector(policy, budget=budget)
        self.name = projection or projection_version(self.projector)
        self.digests = digests_of(self.name)
        self.tokens = TokenRows(store, self.projector.tokenizer, shard or Shard())
        self.card_facts = CardFacts(store) if self.projector.policy.card.enabled else None
        """The card's facts of each message, kept per session (read, or found and written, per batch)."""
        self.renderer.counter.defer_saves = True  # the token cache is written in large groups (``fold``)
        self.failed: dict[str, str] = {}
        self.known = KnownRows()
        self._texts: dict[int, list[Text]] = {}
        """The counted texts of the events ``ahead`` read, by notification id, until ``fold`` counts them."""
        self._counts_ahead: dict[tuple[int, int], dict[int, tuple[int, ...]]] = {}
        """The token rows ``ahead`` read for a coming batch whose every event they count, by its range."""
        self.reads = BatchReads(ledger.log, self.card_facts)
        """The card facts rows and heads of coming batches, read beside the fold (``ahead``)."""
        self._artifacts: dict[str, list[SummaryRecorded]] = {}
        """Summary artifacts read from the notifications and not yet folded, by session."""
        self.counts_at_finish = True
        """Whether ``finish`` writes the fresh counts kept back (else they wait for the caller's flush)."""
        self.digests_wanted = True
        """Whether a catch-up that starts empty writes render digests (off: a rebuild without comparison)."""
        self.release_at_head = False
        """Whether a session folded to its last event leaves memory once its row is written (a rebuild's
        catch-up: memory then holds the sessions in flight, not every session; a live tail keeps them)."""
        self._writes_digests = True
        self.keep_digests = False
        """Whether the digests written are also kept in ``kept_digests`` (a rebuild compares with them)."""
        self.kept_digests: dict[str, RenderDigest] = {}
        """Each session's digest as last written by this instance, while ``keep_digests`` is on: what its
        store holds beside the row, unless another runner moved the view since (``begin`` forgets them)."""

    def begin(self, tracking: int) -> None:
        """Note where the view resumes; forget what memory holds if another runner moved it since.

        A catch-up from empty with ``digests_wanted`` off writes no render digests, and first deletes
        any the version's name still has (left by a drop that stopped half-way): a comparison renders
        a session without a digest from its row. Else every row written gets its digest in the same
        transaction, so no digest ever describes an older row.
        """
        self._writes_digests = self.digests_wanted or tracking > 0
        if not self._writes_digests:
            self.store.drop(self.digests)
        self.reads.begin()
        if not self.known.begin(tracking):
            self.kept_digests.clear()
            self._artifacts.clear()
            self._counts_ahead.clear()
            self.renderer.forget()

    def ahead(self, after: int, upto: int, batch: Sequence[Notification]) -> None:
        """Start counting a coming batch's new texts in the background while an earlier one folds.

        Only the texts of events without token rows, as ``fold`` will count them (``prefetch``: a
        no-op unless the tokenizer counts ahead). When the rows count every event of the batch,
        ``fold`` takes them as read here (it writes no count of its own, so this writer's blocks,
        which the current batch's commit may change, are not needed); else it reads them again.
        """
        mains = [note for note in batch if SIDE_STREAM_SEPARATOR not in note.stream_id]
        self.reads.start((after, upto), mains, heads=self.release_at_head)
        counter = self.renderer.counter
        if not counter.counts_ahead:
            return
        known = self.tokens.peek(after, upto) if mains else {}
        texts = {note.id: counted_texts(note.event) for note in mains if note.id not in known}
        if not texts:
            self._counts_ahead[(after, upto)] = known
        self._texts.update(texts)
        counter.prefetch([t for group in texts.values() for t in group])

    def fold(self, after: int, upto: int, batch: Sequence[Notification]) -> dict[str, Rows]:
        """Fold the sessions a batch touches; return their rows and the batch's new token rows."""
        # The counts of the batches before, in a large group, written while this one folds; the ones
        # left when the catch-up ends are ``finish``'s: the last batch never starts a write that would
        # hold up its own commit (the store takes one writer at a time).
        self.renderer.counter.flush(at_least=UNSAVED_COUNTS, aside=True)
        self.known.folded_upto = upto
        touched, read, missing = self._split(after, upto, batch)
        fresh = self._counted(after, upto, read, missing)
        stored = self._stored([s for s in touched if self._may_have_row(s)])
        rows: Rows = {}
        digests: Rows = {}
        for session_id, seen in touched.items():
            row = stored.get(session_id)
            at = max(seen, self.renderer.position_of(session_id, self.projector), row[0] if row else 0)
            if at == 0:
                continue  # an artifact of a session with no events yet
            data = self._fold_session(session_id, at, row, read.get(session_id, []))
            if data is not None:
                rows[session_id] = (at, data)
                self._add_digest(digests, session_id, at)
            else:  # kept beside the rows: a later run (no fold left to fail) must not switch to it
                digests[session_id] = (at, encode_digest(failed_digest(self.failed[session_id])))
        self._release_at_head(rows, self.reads.heads((after, upto)))
        return {self.name: rows, self.digests: digests, **fresh}

    def _split(
        self, after: int, upto: int, batch: Sequence[Notification]
    ) -> tuple[dict[str, int], dict[str, list[CountedEvent]], _Missing]:
        """One pass over a batch: the position each session reaches, its events counted from the token rows.

        Returns the sessions touched (with the position each reaches; 0 for an artifact alone), each
        session's events in order, and the events without token rows, each with its place in its
        session's list (``_counted`` counts them). A fork's events take their virtual positions, and
        summary artifacts are kept for their sessions (``_artifacts``).
        """
        touched: dict[str, int] = {}
        read: dict[str, list[CountedEvent]] = {}  # by session, in order; an uncounted event's place kept
        missing: _Missing = []
        known: dict[int, tuple[int, ...]] | None = None  # the token rows, read at the first session event
        with_counts = self.renderer.reader.with_counts
        projector = self.projector
        forks = self.renderer.ledger.forks
        roots: set[str] = set()  # sessions without a fork parent (it never changes): positions are their own
        current: str | None = None  # the session of the event before: a batch holds runs of one session
        events: list[CountedEvent] = []
        for note in batch:
            stream, _, kind = note.stream_id.partition(SIDE_STREAM_SEPARATOR)  # split_stream, inlined
            if not kind:
                if stream in roots:
                    position = note.position
                else:
                    # a fork's positions follow its parent's prefix
                    position = forks.virtual_position(stream, note.position, note.event)
                    if forks.parent_of(stream) is None:
                        roots.add(stream)
                event = note.event  # a fork's first event already brings its parent's prefix
                parent = event.parent if isinstance(event, SessionStarted) else None
                touched[stream] = position if parent is None else max(position, parent.position)
                if stream != current:
                    current, events = stream, read.setdefault(stream, [])
                if known is None:
                    known = self._known_counts(after, upto)
                found = known.get(note.id)
                if found is None:
                    missing.append((events, len(events), note, position))
                    events.append(CountedEvent(position=position, event=event))  # its place, until counted
                else:
                    events.append(with_counts(projector, position, event, found))  # resolves a blob to cut
            elif kind == SUMMARIES_KIND:
                touched.setdefault(stream, 0)
                if isinstance(note.event, SummaryRecorded):
                    self._artifacts.setdefault(stream, []).append(note.event)
        return touched, read, missing

    def _release_at_head(self, rows: Rows, heads: dict[str, int]) -> None:
        """Drop the states of the sessions this batch folded to their last event (one read of their heads).

        Their rows, in this batch's commit, hold them: a session touched again (an event appended since,
        an artifact) is read back from its row, as after an eviction. A session with an artifact not yet
        due keeps its state, and so does a fork (its positions follow its parent's, not its stream's).
        Nothing is read unless ``release_at_head`` is on. ``heads``: those read beside the fold when the
        batch was (``BatchReads.heads``); the sessions they do not name (an artifact's) are read now.
        """
        if not self.release_at_head or not rows:
            return
        if missing := [session_id for session_id in rows if session_id not in heads]:
            heads = {**heads, **self.renderer.ledger.log.versions(missing)}
        for session_id, (at, _) in rows.items():
            if heads.get(session_id) == at and session_id not in self._artifacts:
                self.renderer.release(session_id, self.projector)

    def finish(self) -> None:
        """Write the fresh token counts kept back (the batches write them only in large groups).

        Not when ``counts_at_finish`` is off: the caller writes them (``rebuild`` does, once the
        leases are released, beside the freeing of the states and the comparison).
        """
        if self.counts_at_finish:
            self.renderer.counter.flush()

    def _add_digest(self, digests: Rows, session_id: str, at: int) -> None:
        """Add the digest of the session just folded to its row's, unless this catch-up writes none."""
        if self._writes_digests:
            digest = self._digest(session_id)
            digests[session_id] = (at, encode_digest(digest))
            if self.keep_digests:
                self.kept_digests[session_id] = digest

    def _digest(self, session_id: str) -> RenderDigest:
        """The comparison's digest of the session's render, from the state just folded (nothing is read)."""
        state = self.renderer.held(session_id, self.projector)
        if state is None:
            return failed_digest("no state held")  # not reached: a folded state is held
        try:
            return state_digest(self.projector, state)
        except ContextLedgerError as error:
            return failed_digest(str(error))

    def _counted(
        self,
        after: int,
        upto: int,
        read: dict[str, list[CountedEvent]],
        missing: _Missing,
    ) -> dict[str, Rows]:
        """Finish counting a batch's session events, which ``_split`` split by session (``read``).

        ``_split`` gave each event its counts from the token rows; the rest (``missing``, each with its
        place) are counted here through the token cache at once. With the card, each message also gets
        its card facts (``card_facts``), set on the events in place. Returns the new token and card
        facts rows by name.
        """
        fresh = self._count(missing) if missing else {}
        if self._texts:
            self._texts = {i: texts for i, texts in self._texts.items() if i > upto}
        if self._counts_ahead:
            self._counts_ahead = {span: rows for span, rows in self._counts_ahead.items() if span[1] > upto}
        produced: dict[str, Rows] = {self.tokens.name: self.tokens.rows(fresh) if fresh else {}}
        cards = self.card_facts
        ahead = self.reads.facts((after, upto))
        if cards is not None and read:
            facts = cards.batch(read, ahead)
            for session_id, events in read.items():
                facts.attach(session_id, events)  # in place: the events were made for this batch
            if written := facts.rows():
                produced[cards.name] = written
                self.reads.facts_written = True
        return produced

    def _count(self, missing: _Missing) -> dict[int, tuple[int, ...]]:
        """Count the events without token rows at once, each put in its place; return their counts by id."""
        records = [Recorded(position, note.event) for _, _, note, position in missing]
        ahead = self._texts
        texts = [ahead.pop(note.id, []) or counted_texts(note.event) for _, _, note, _ in missing]
        fresh: dict[int, tuple[int, ...]] = {}
        done = self.renderer.reader.count(self.projector, records, texts)
        for (events, at, note, _), counted in zip(missing, done, strict=True):
            events[at] = counted
            fresh[note.id] = counted.tokens
        return fresh

    def _known_counts(self, after: int, upto: int) -> dict[int, tuple[int, ...]]:
        """The batch's token rows: as ``ahead`` read them when they count every event, else read now."""
        known = self._counts_ahead.pop((after, upto), None)
        if known is None:
            known = self.tokens.load(after, upto)
        return known

    def _fold_session(
        self, session_id: str, at: int, row: tuple[int, bytes] | None, events: list[CountedEvent]
    ) -> bytes | None:
        # The artifacts seen in the notifications are all there are when the state is in memory, or
        # when the view started empty and this session has no row; after reading a row back (a
        # restart, an eviction) every artifact is read, since some may not have been due yet.
        in_memory = self.renderer.position_of(session_id, self.projector) > 0
        complete = in_memory or (row is None and self.known.complete)
        pending = self._artifacts.get(session_id, [])
        last = events[-1].position if events else 0
        contiguous = last == at and last - events[0].position == len(events) - 1
        try:
            data = self.renderer.fold_row(
                session_id,
                self.projector,
                at,
                row[1] if row else None,
                events=events if contiguous else (),
                summaries=pending if complete else None,
            )
        except ContextLedgerError as error:
            self.failed[session_id] = str(error)
            log.warning("projection_session_failed", projection=self.name, session_id=session_id)
            return None
        later = [s for s in pending if s.produced_at > at]  # not due yet: kept until the state gets there
        if later:
            self._artifacts[session_id] = later
        else:
            self._artifacts.pop(session_id, None)
        self.known.written.add(session_id)
        return data

    def _stored(self, keys: list[str]) -> Rows:
        return self.store.load_rows(self.name, keys) if keys else {}

    def _may_have_row(self, session_id: str) -> bool:
        """Whether a row must be read: not in memory, nor known absent (empty at start, not written since)."""
        in_memory = self.renderer.position_of(session_id, self.projector) > 0
        return not in_memory and self.known.may_exist(session_id)
