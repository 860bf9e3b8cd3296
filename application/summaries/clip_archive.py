"""Clip-archive planning (seed 003): summary batches with depth; the middle re-summarized one level deeper."""

from __future__ import annotations

from collections.abc import Sequence

from contextledger.domain.events import SummaryRecorded

__all__ = ["BUFFER", "BatchPlan", "plan_batch", "visible_batches"]

BUFFER = 4
"""Batches allowed past ``clip_first + clip_last`` before the middle is re-summarized (seed 003's buffer).

Each re-summarization folds ``BUFFER + 1`` batches into one, so it costs one summary call per ``BUFFER``
new batches; its size stays bounded like every summary's."""


class BatchPlan:
    """A batch to summarize: a fresh span (depth 0) or the middle batches folded one level deeper."""

    def __init__(self, covers_from: int, covers_through: int, depth: int, batches: int) -> None:
        self.covers_from = covers_from
        self.covers_through = covers_through
        self.depth = depth
        self.batches = batches
        """How many batches exist (the new one's round is the next)."""


def visible_batches(batches: Sequence[SummaryRecorded]) -> list[SummaryRecorded]:
    """Batches not folded into a wider (deeper) one, in log order: what clip-archive chooses from."""
    inside = {
        b.summary_id
        for b in batches
        for o in batches
        if o is not b
        and o.covers_from <= b.covers_from
        and b.covers_through <= o.covers_through
        and (o.covers_from, o.covers_through, o.depth) != (b.covers_from, b.covers_through, b.depth)
        and o.depth >= b.depth
    }
    return sorted((b for b in batches if b.summary_id not in inside), key=lambda b: (b.covers_from, b.depth))


def plan_batch(
    batches: Sequence[SummaryRecorded], dropped_through: int, *, clip_first: int, clip_last: int
) -> BatchPlan | None:
    """Return the next clip-archive request, or None when none is due.

    The middle batches are re-summarized one level deeper when there are too many; otherwise what was
    dropped past the last batch becomes a new depth-0 batch.
    """
    visible = visible_batches(batches)
    if len(visible) > clip_first + clip_last + BUFFER:
        middle = visible[clip_first : len(visible) - clip_last]
        depth = max(b.depth for b in middle) + 1
        return BatchPlan(middle[0].covers_from, middle[-1].covers_through, depth, len(batches))
    covered = max((b.covers_through for b in batches), default=1)
    if dropped_through <= covered:
        return None
    return BatchPlan(covered + 1, dropped_through, 0, len(batches))
