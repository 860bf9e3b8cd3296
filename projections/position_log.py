"""An append-only list of tuples in position order whose copy does not grow with the session."""

from __future__ import annotations

import bisect
import itertools
import operator
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar

import msgspec

__all__ = ["CHUNK", "PositionLog"]

CHUNK = 256
"""Items per frozen chunk: a copy takes ``len / CHUNK`` chunk references and at most ``CHUNK - 1`` items.

Rows and snapshots store the chunks as they are: changing it changes their layout (raise ``ROW_FORMAT`` and
``SNAPSHOT_FORMAT``). A log of another shape is refused when it is made or decoded (``__post_init__``).
"""

T = TypeVar("T", bound=tuple[Any, ...])

_position = operator.itemgetter(0)


def _last_position(chunk: tuple[Any, ...]) -> Any:
    return chunk[-1][0]


class PositionLog(msgspec.Struct, Generic[T], array_like=True):
    """Tuples appended in non-decreasing order of their first item (a log position), kept in frozen chunks.

    The session-state card remembers every user message and every tool result of a session. As plain
    lists they were copied and freed whole at every catch-up of a render (``RenderState.copy``):
    0.6 ms a turn at 20,000 turns, where the rest of a turn stays flat (ADR 0081). Here every
    ``CHUNK`` items become one immutable tuple that copies share, so ``copy`` takes the list of chunks
    and the open ``tail`` only. Equal appends give equal chunks, so equal logs encode to equal bytes.

    It reads as a sequence (``len``, iteration, ``reversed``, an index) and finds positions by
    bisection (``span``, ``holds``). Only ``append`` changes it, and only its owner may call it (a
    state's copy owns its own log: see ``copy``).
    """

    chunks: list[tuple[T, ...]] = msgspec.field(default_factory=list)
    """Full chunks of ``CHUNK`` items each, oldest first; shared by copies (tuples never change)."""
    tail: list[T] = msgspec.field(default_factory=list)
    """The newest items, fewer than ``CHUNK``; each copy has its own."""

    def __post_init__(self) -> None:
        """Refuse a log that ``append`` cannot have made: a chunk of another size, or a full tail.

        The indexes are computed from ``CHUNK`` (``divmod``): such a log would read the wrong items. A
        decoded one raises ``msgspec.ValidationError``, so the row or snapshot holding it is unreadable.
        """
        if len(self.tail) >= CHUNK or any(len(chunk) != CHUNK for chunk in self.chunks):
            msg = f"a PositionLog holds chunks of {CHUNK} items and a tail of fewer"
            raise ValueError(msg)

    @classmethod
    def of(cls, items: Iterable[T]) -> PositionLog[T]:
        """Return a log of ``items``, appended in order."""
        log: PositionLog[T] = cls()
        for item in items:
            log.append(item)
        return log

    def append(self, item: T) -> None:
        """Add ``item`` (its position at least the last one's) at the end."""
        tail = self.tail
        tail.append(item)
        if len(tail) == CHUNK:
            self.chunks.append(tuple(tail))
            tail.clear()

    def copy(self) -> PositionLog[T]:
        """Return an independent log with the same items: O(len / CHUNK + CHUNK), not O(len)."""
        return PositionLog(list(self.chunks), list(self.tail))

    def __len__(self) -> int:
        """The number of items."""
        return len(self.chunks) * CHUNK + len(self.tail)

    def __iter__(self) -> Iterator[T]:
        """The items, oldest first."""
        return itertools.chain(itertools.chain.from_iterable(self.chunks), self.tail)

    def __reversed__(self) -> Iterator[T]:
        """The items, newest first."""
        older = itertools.chain.from_iterable(map(reversed, reversed(self.chunks)))
        return itertools.chain(reversed(self.tail), older)

    def __getitem__(self, index: int) -> T:
        """The item at ``index`` (negative counts from the end); ``IndexError`` outside the log."""
        size = len(self)
        at = index + size if index < 0 else index
        if not 0 <= at < size:
            raise IndexError(index)
        chunk, offset = divmod(at, CHUNK)
        return self.chunks[chunk][offset] if chunk < len(self.chunks) else self.tail[offset]

    def span(self, first: int, last: int) -> tuple[int, int]:
        """Return ``(lo, hi)``: the items whose position is in ``first..last`` are those at ``lo..hi - 1``."""
        lo = self._bisect(first, right=False)
        return lo, max(lo, self._bisect(last, right=True))

    def items(self, lo: int, hi: int) -> list[T]:
        """Return the items at ``lo..hi - 1``, reading only those (``lo`` and ``hi`` clamped to the log)."""
        lo, hi = max(lo, 0), min(hi, len(self))
        out: list[T] = []
        chunks = self.chunks
        chunk, offset = divmod(lo, CHUNK)
        while lo < hi:  # a slice of each chunk crossed (C-level copies), then of the tail
            part = chunks[chunk] if chunk < len(chunks) else self.tail
            taken = part[offset : offset + hi - lo]
            out += taken
            lo += len(taken)
            chunk, offset = chunk + 1, 0
        return out

    def holds(self, position: int) -> bool:
        """Whether an item has ``position``."""
        inside, _, at = self._place(position, right=False)
        return at < len(inside) and inside[at][0] == position

    def _bisect(self, position: int, *, right: bool) -> int:
        """The index where ``position`` would go: before equal positions, or after them with ``right``."""
        _, chunk, at = self._place(position, right=right)
        return chunk * CHUNK + at

    def _place(self, position: int, *, right: bool) -> tuple[Sequence[T], int, int]:
        """Where ``position`` would go: the chunk (or the tail), its number, and the place in it."""
        find = bisect.bisect_right if right else bisect.bisect_left
        chunks = self.chunks
        # Every chunk before ``at`` ends below ``position`` (or at it, with ``right``): the place is in
        # chunk ``at``, or in the tail when every chunk does.
        at = find(chunks, position, key=_last_position)
        inside: Sequence[T] = chunks[at] if at < len(chunks) else self.tail
        return inside, at, find(inside, position, key=_position)
