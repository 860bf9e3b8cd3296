"""Token counts cached by content hash per tokenizer, in memory and in the store."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Protocol, runtime_checkable

from contextledger.application.kernel.aside import Aside
from contextledger.domain.content import BlobText, InlineText, Text, content_address
from contextledger.domain.ports import BlobReader, TokenCounter, TokenCountStore, TokenFloor

__all__ = ["AHEAD_BLOB_CHARS", "PROBE", "TEXT_CHARS", "UNSAVED_COUNTS", "CachedTokenCounter", "CountsAhead"]

AHEAD_BLOB_CHARS = 1 << 24
"""Characters of blobs one ``prefetch`` reads and hands to the background at most (others are read later)."""

PROBE = 64
"""Inline texts of a batch looked up first (``prefetch``): when none is stored, the rest are not looked up."""

TEXT_CHARS = 1 << 25
"""Characters of the texts whose counts are kept by the text itself at most (~32 M: a few batches' texts)."""

UNSAVED_COUNTS = 1 << 16
"""Fresh counts a rebuild keeps back before it writes them (``flush(at_least=...)``): ~10 MiB at most."""


@runtime_checkable
class CountsAhead(Protocol):
    """A tokenizer that counts texts in the background (optional, next to ``TokenCounter``)."""

    def count_ahead(self, texts: Sequence[str]) -> Callable[[], list[int]]:
        """Start counting ``texts``; the call returned waits for ``count_many(texts)`` (or raises)."""
        ...


class _Ahead:
    """Texts counted in the background: their content addresses and the call that waits for the counts."""

    __slots__ = ("keys", "texts", "wait")

    def __init__(self, texts: list[str], keys: list[str], wait: Callable[[], list[int]]) -> None:
        self.texts = texts
        self.keys = keys
        self.wait = wait


class CachedTokenCounter:
    """Counts each distinct text at most once per tokenizer and remembers the count in the store.

    A blob's count is found by its address without reading the blob; the tokenizer runs only
    for texts no process has counted before, and blobs it must count are read and counted one at a
    time (memory holds one large text, not every blob of a batch). ``prefetch`` starts counting a
    coming batch's texts in the background when the tokenizer can (``CountsAhead``); its blobs are
    held until counted, up to ``AHEAD_BLOB_CHARS`` characters a batch.
    """

    def __init__(
        self,
        counter: TokenCounter,
        counts: TokenCountStore,
        blobs: BlobReader,
        *,
        memory_limit: int = 200_000,
        text_chars: int = TEXT_CHARS,
    ) -> None:
        """Cache ``counter``'s results in memory and in ``counts``; read unknown blobs from ``blobs``."""
        self.counter = counter
        self._floor = counter.tokens_at_least if isinstance(counter, TokenFloor) else None
        """The tokenizer's lower bound, looked up once (a runtime protocol check costs ~70 us a call)."""
        self.counts = counts
        self.blobs = blobs
        self._memory: dict[str, int] = {}
        self._by_text: dict[str, int] = {}
        """Counts of inline texts seen in this process, by the text itself (no SHA-256 to look one up)."""
        self._by_text_chars = 0
        self._text_chars = text_chars
        self._memory_limit = memory_limit
        self.tokenized = 0
        """How many texts were actually tokenized (cache misses)."""
        self.defer_saves = False
        """Keep fresh counts until ``flush`` (one write per batch of a rebuild) instead of at once."""
        self._unsaved: dict[str, int] = {}
        self._saving: Aside | None = None
        """The write ``flush(aside=True)`` started, until the next flush."""
        self._held = 0
        """``saves_held`` blocks running (any thread): fresh counts wait in ``_unsaved`` until none is."""
        self._held_lock = threading.Lock()
        self._ahead: dict[str, _Ahead] = {}
        """Inline texts being counted in the background (``prefetch``), by the text itself."""
        self._ahead_blobs: dict[str, _Ahead] = {}
        """Blobs being counted in the background, by their address."""

    @property
    def name(self) -> str:
        """The wrapped tokenizer's name."""
        return self.counter.name

    @property
    def counts_ahead(self) -> bool:
        """Whether ``prefetch`` counts in the background (else it does nothing)."""
        return isinstance(self.counter, CountsAhead)

    def warm(self) -> None:
        """Start loading the tokenizer on its background thread, if it counts ahead (a build about to count).

        Loading cl100k_base takes ~0.25 s, holding the GIL; a first rebuild's tokenizer thread otherwise
        loaded it only with the first batch's texts, while the main thread waited for their counts.
        """
        if isinstance(self.counter, CountsAhead):
            self.counter.count_ahead([])  # loads the encoding; the empty count is not waited for

    @contextmanager
    def saves_held(self) -> Iterator[None]:
        """Keep the counts made in the block in memory, and write them in one go when it ends.

        Otherwise each fresh count is written when it is made. A fold of a long session under a tight
        budget counts a new session-state card at every compaction, and each was one write transaction:
        28 % of an 80,000-event session rendered from scratch. Blocks nest, across threads too: the last
        to end writes. A block that raises writes nothing (the next one writes what it kept). Nothing is
        written here under ``defer_saves`` (a rebuild or a simulation writes when it chooses).
        """
        if self.defer_saves:  # a rebuild's catch-up, 4,508 blocks on the fixtures x20: no lock needed
            yield
            return
        with self._held_lock:
            self._held += 1
        ended = False
        try:
            yield
            ended = True
        finally:
            with self._held_lock:
                self._held -= 1
                last = self._held == 0
            if ended and last and not self.defer_saves:
                self.flush()

    def count(self, text: str) -> int:
        """Return the token count of ``text``."""
        return self.count_many([text])[0]

    def tokens_at_least(self, text: str) -> int:
        """Return the wrapped tokenizer's lower bound of ``text``'s count (0 when it has none)."""
        return 0 if self._floor is None else self._floor(text)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Return token counts of texts, tokenizing only those never counted."""
        keys = [content_address(t) for t in texts]
        self._fill(keys, dict(zip(keys, texts, strict=True)))
        return [self._memory[k] for k in keys]

    def prefetch(self, texts: Sequence[Text]) -> None:
        """Start counting in the background the texts of a coming batch that no process counted.

        Each new distinct text is hashed and looked up in the store here, once (``_stored``: a batch
        whose sample is not stored is not looked up further; ``count_texts`` finds each text by the
        text afterwards); the inline texts left are handed to the tokenizer's ``count_ahead``
        in one call, each blob left is read and handed on alone (up to ``AHEAD_BLOB_CHARS`` characters
        a batch; ``count_texts`` counts the others), and ``count_texts`` waits for a count only when
        it meets its text. Does nothing unless the tokenizer counts ahead.
        """
        counter = self.counter
        if not isinstance(counter, CountsAhead):
            return
        new, blobs = self._unknown(texts)
        if not new and not blobs:
            return
        inline = {content_address(text): text for text in new}
        stored = self._stored(list(inline), list(blobs))
        if stored:
            self._remember({inline[k]: n for k, n in stored.items() if k in inline}, stored)
        keys = [key for key in inline if key not in stored]
        if keys:
            unknown = [inline[key] for key in keys]
            job = _Ahead(unknown, keys, counter.count_ahead(unknown))
            self._ahead.update(dict.fromkeys(unknown, job))
        budget = AHEAD_BLOB_CHARS
        for key in blobs:
            if key not in stored and budget > 0:
                text = self.blobs.read_blob(key)
                budget -= len(text)
                self._ahead_blobs[key] = _Ahead([], [key], counter.count_ahead([text]))

    def _stored(self, inline: list[str], blobs: list[str]) -> dict[str, int]:
        """The stored counts of a coming batch's keys; its inline texts are looked up only if a sample hits.

        A first rebuild of an imported log finds none of its texts counted, and looking each one up
        cost a twentieth of its main thread. So ``PROBE`` inline keys spread over the batch are looked
        up first, and the others only when one of them is found. A count missed this way is counted
        again, the same (blobs, which would be read, are always looked up).
        """
        name = self.counter.name
        if len(inline) > PROBE:
            sample = inline[:: len(inline) // PROBE][:PROBE]
            found = self.counts.load_token_counts(name, [*sample, *blobs])
            if not any(key in found for key in sample):
                return found
            sampled = set(sample)
            rest = [key for key in inline if key not in sampled]
            return {**found, **self.counts.load_token_counts(name, rest)}
        return self.counts.load_token_counts(name, [*inline, *blobs])

    def _unknown(self, texts: Sequence[Text]) -> tuple[dict[str, None], dict[str, None]]:
        """The distinct inline texts and blob addresses of ``texts`` neither in memory nor being counted."""
        by_text, ahead, memory, ahead_blobs = self._by_text, self._ahead, self._memory, self._ahead_blobs
        new: dict[str, None] = {}
        blobs: dict[str, None] = {}
        for t in texts:
            if isinstance(t, InlineText):
                if t.text not in by_text and t.text not in ahead:
                    new[t.text] = None
            elif t.sha256 not in memory and t.sha256 not in ahead_blobs:
                blobs[t.sha256] = None
        return new, blobs

    def count_texts(self, texts: Sequence[Text]) -> list[int]:
        """Return token counts of event contents; a blob is read only if its count is unknown.

        An inline text seen before in this process is found by the text itself (after waiting for
        it if ``prefetch`` is counting it); the others are hashed once per distinct text of the
        batch, looked up in the store, and tokenized in one batch if no process counted them before.
        """
        if self._ahead or self._ahead_blobs:
            self._settle(texts)
        by_text = self._by_text
        found: list[int | None] = []
        new: dict[str, None] = {}
        blobs: list[str] = []
        for text in texts:
            if isinstance(text, InlineText):
                count = by_text.get(text.text)
                if count is None:
                    new[text.text] = None
                found.append(count)
            else:
                blobs.append(text.sha256)
                found.append(None)
        if not new and not blobs:
            return found  # type: ignore[return-value]  # no None left
        inline = {content_address(text): text for text in new}
        self._fill([*inline, *blobs], inline)
        memory = self._memory
        self._keep_by_text({text: memory[key] for key, text in inline.items()})
        return [
            n if n is not None else memory[t.sha256] if isinstance(t, BlobText) else by_text[t.text]
            for t, n in zip(texts, found, strict=True)
        ]

    def flush(self, *, at_least: int = 1, aside: bool = False) -> None:
        """Write the counts kept back by ``defer_saves`` to the store (one write), if ``at_least`` wait.

        ``aside`` writes them on a thread of its own when the store allows it (a caller folds on
        meanwhile; counts looked up before it lands are only counted again); a flush without it
        waits for that write, then writes the rest.

        A rebuild passes a large ``at_least`` after each batch and flushes the rest when it is done:
        the counts are keyed by hash, so each write touches pages all over the table, and one write
        per batch rewrote most of it every batch (a first rebuild spent a sixth of its time there).
        Counts not yet written when a process dies are only counted again (the token rows, committed
        with each batch, keep every event's counts).
        """
        if not aside:
            self.settle()
        if not self._unsaved or len(self._unsaved) < at_least:
            return
        unsaved, self._unsaved = self._unsaved, {}
        name, save = self.counter.name, self.counts.save_token_counts
        if aside and self.counts.writes_aside:
            self.settle()  # one write at a time
            self._saving = Aside(lambda: save(name, unsaved), name="contextledger-counts")
        else:
            save(name, unsaved)

    def settle(self) -> None:
        """Wait for the write ``flush(aside=True)`` started, if any; raise its error."""
        saving, self._saving = self._saving, None
        if saving is not None:
            saving.settle()

    def _settle(self, texts: Sequence[Text]) -> None:
        """Wait for the background counts of ``texts`` and keep them (and save them, as fresh counts)."""
        ahead, blobs = self._ahead, self._ahead_blobs
        waiting = (ahead.get(t.text) if isinstance(t, InlineText) else blobs.get(t.sha256) for t in texts)
        jobs = {id(job): job for job in waiting if job is not None}
        for job in jobs.values():
            for text in job.texts:
                del ahead[text]
            if not job.texts:
                del blobs[job.keys[0]]
            counts = job.wait()
            fresh = dict(zip(job.keys, counts, strict=True))
            self._remember(dict(zip(job.texts, counts, strict=True)) if job.texts else {}, fresh)
            self._fresh(fresh)

    def _remember(self, by_text: dict[str, int], by_key: dict[str, int]) -> None:
        """Keep counts in memory by text and by key (each memory emptied first if it would overflow)."""
        self._keep_by_text(by_text)
        if len(self._memory) + len(by_key) > self._memory_limit:
            self._memory.clear()
        self._memory.update(by_key)

    def _keep_by_text(self, counts: dict[str, int]) -> None:
        """Keep counts by their texts, emptying that memory first if it would pass its entries or characters.

        The texts are held alive by this memory: bounded by characters too, a first rebuild holds a few
        batches' texts instead of every text of the log (a text met again after the memory was emptied is
        found by its hash, in the store or by counting it again).
        """
        chars = sum(map(len, counts))
        by_text = self._by_text
        if len(by_text) + len(counts) > self._memory_limit or self._by_text_chars + chars > self._text_chars:
            by_text.clear()
            self._by_text_chars = 0
        by_text.update(counts)
        self._by_text_chars += chars

    def _fresh(self, fresh: dict[str, int]) -> None:
        """Count texts just tokenized and save them (or keep them for ``flush``)."""
        self.tokenized += len(fresh)
        if self.defer_saves:
            self._unsaved.update(fresh)
        elif self._held:  # held in memory up to a rebuild's batch of counts (a long catch-up)
            self._unsaved.update(fresh)
            if len(self._unsaved) >= UNSAVED_COUNTS:
                self.flush()
        else:
            self.counts.save_token_counts(self.counter.name, fresh)

    def _fill(self, keys: Sequence[str], known_texts: dict[str, str]) -> None:
        missing = list(dict.fromkeys(k for k in keys if k not in self._memory))
        if not missing:
            return
        if len(self._memory) + len(missing) > self._memory_limit:
            self._memory.clear()  # then every key of this batch must be (re)loaded, not only the new ones
            missing = list(dict.fromkeys(keys))
        self._memory.update(self.counts.load_token_counts(self.counter.name, missing))
        still = [k for k in missing if k not in self._memory]
        if not still:
            return
        inline = [k for k in still if k in known_texts]
        fresh = dict(zip(inline, self.counter.count_many([known_texts[k] for k in inline]), strict=True))
        for key in still:
            if key not in fresh:
                # One blob at a time: only one large text is held, however many the batch names.
                fresh[key] = self.counter.count(self.blobs.read_blob(key))
        self._memory.update(fresh)
        self._fresh(fresh)
