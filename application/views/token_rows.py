"""Per-event token counts kept as rows: a rebuild under another policy reads them instead of counting."""

from __future__ import annotations

import msgspec
from contextledger.application.views.view_runner import Rows, Shard
from contextledger.domain.ports import ProjectionRows

__all__ = ["BLOCK", "TokenRows", "token_rows"]

BLOCK = 1_024
"""Notification ids per row: a batch reads its counts in one or two rows."""

_CODEC_DECODE = msgspec.msgpack.Decoder(dict[int, tuple[int, ...]]).decode
_ENCODE = msgspec.msgpack.Encoder().encode


def token_rows(tokenizer: str) -> str:
    """The name of the rows that keep each event's token counts under ``tokenizer``.

    Counts depend only on an event's texts and the tokenizer, and events are immutable, so the
    rows never go stale.
    """
    return f"tokens/{tokenizer}/v1"


class TokenRows:
    """Reads and extends the token rows of one tokenizer, in blocks of ``BLOCK`` notification ids.

    A row holds ``{notification id: counts}`` for the events one writer counted in its block; its
    key is ``<block>/<writer shard>``, so shards of a rebuild never overwrite each other, and a
    reader merges every writer's rows of a block (counts are the same whoever wrote them).
    """

    def __init__(self, store: ProjectionRows, tokenizer: str, shard: Shard) -> None:
        """Keep the rows of ``tokenizer`` in ``store``, writing as ``shard``."""
        self.store = store
        self.name = token_rows(tokenizer)
        self._tag = f"{shard.index}of{shard.count}"
        self._mine: dict[int, dict[int, tuple[int, ...]]] = {}
        """This writer's blocks read or written last (merged into, then written back)."""

    def load(self, after: int, upto: int) -> dict[int, tuple[int, ...]]:
        """Return the known counts of notification ids in ``(after, upto]`` (one range read)."""
        counts, self._mine = self._read(after, upto)
        return counts

    def peek(self, after: int, upto: int) -> dict[int, tuple[int, ...]]:
        """``load`` of a coming batch, read ahead: this writer's blocks are left as they are."""
        return self._read(after, upto)[0]

    def _read(
        self, after: int, upto: int
    ) -> tuple[dict[int, tuple[int, ...]], dict[int, dict[int, tuple[int, ...]]]]:
        first, last = (after + 1) // BLOCK, upto // BLOCK
        found = self.store.load_range(self.name, f"{first:012d}", f"{last:012d}/\x7f")
        counts: dict[int, tuple[int, ...]] = {}
        mine: dict[int, dict[int, tuple[int, ...]]] = {}
        for key, (_, data) in found.items():
            block, _, tag = key.partition("/")
            try:
                decoded = _CODEC_DECODE(data)
            except msgspec.DecodeError:
                continue  # derived: an unreadable row only means counting those events again
            counts.update(decoded)
            if tag == self._tag:
                mine[int(block)] = decoded
        return counts, mine

    def rows(self, fresh: dict[int, tuple[int, ...]]) -> Rows:
        """Return the rows that add ``fresh`` counts (this writer's blocks, merged) to the store."""
        touched: dict[int, dict[int, tuple[int, ...]]] = {}
        for notification_id, counts in fresh.items():
            block = notification_id // BLOCK
            merged = touched.get(block)
            if merged is None:
                merged = touched[block] = dict(self._mine.get(block, {}))
            merged[notification_id] = counts
        rows: Rows = {}
        for block, merged in touched.items():
            self._mine[block] = merged
            rows[f"{block:012d}/{self._tag}"] = (max(merged), _ENCODE(dict(sorted(merged.items()))))
        return rows
