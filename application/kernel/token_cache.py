"""Token counts cached by content hash per tokenizer, in memory and in the store."""

from __future__ import annotations

from collections.abc import Sequence

from contextledger.domain.content import BlobText, InlineText, Text, content_address
from contextledger.domain.ports import BlobReader, TokenCounter, TokenCountStore, TokenFloor

__all__ = ["CachedTokenCounter"]


class CachedTokenCounter:
    """Counts each distinct text at most once per tokenizer and remembers the count in the store.

    A blob's count is found by its address without reading the blob; the tokenizer runs only
    for texts no process has counted before, and blobs it must count are read and counted one at a
    time (memory holds one large text, not every blob of a batch).
    """

    def __init__(
        self,
        counter: TokenCounter,
        counts: TokenCountStore,
        blobs: BlobReader,
        *,
        memory_limit: int = 200_000,
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
        self._memory_limit = memory_limit
        self.tokenized = 0
        """How many texts were actually tokenized (cache misses)."""
        self.defer_saves = False
        """Keep fresh counts until ``flush`` (one write per batch of a rebuild) instead of at once."""
        self._unsaved: dict[str, int] = {}

    @property
    def name(self) -> str:
        """The wrapped tokenizer's name."""
        return self.counter.name

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

    def count_texts(self, texts: Sequence[Text]) -> list[int]:
        """Return token counts of event contents; a blob is read only if its count is unknown.

        An inline text seen before in this process is found by the text itself; the others are
        hashed once per distinct text of the batch, looked up in the store, and tokenized in one
        batch if no process counted them before.
        """
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
        if len(by_text) + len(inline) > self._memory_limit:
            by_text.clear()
        by_text.update((text, memory[key]) for key, text in inline.items())
        return [
            n if n is not None else memory[t.sha256] if isinstance(t, BlobText) else by_text[t.text]
            for t, n in zip(texts, found, strict=True)
        ]

    def flush(self) -> None:
        """Write the counts kept back by ``defer_saves`` to the store (one write)."""
        if self._unsaved:
            unsaved, self._unsaved = self._unsaved, {}
            self.counts.save_token_counts(self.counter.name, unsaved)

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
        self.tokenized += len(fresh)
        self._memory.update(fresh)
        if self.defer_saves:
            self._unsaved.update(fresh)
        else:
            self.counts.save_token_counts(self.counter.name, fresh)
