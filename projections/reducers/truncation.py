"""Truncation of long tool outputs: cut to N lines / tokens with a marker naming the restore position."""

from __future__ import annotations

from typing import Annotated

import msgspec
import pydantic
from contextledger.domain.ports import TokenCounter
from contextledger.projections.budget import Budget
from contextledger.projections.context import MESSAGE_OVERHEAD
from contextledger.projections.groups import pin_reason, replace_entries
from contextledger.projections.state import Entry, RenderState, WorkingContext

__all__ = ["TruncationConfig", "TruncationReducer", "cut_lines", "cut_tokens", "shorten"]

_MAX_ROUNDS = 8


class TruncationConfig(pydantic.BaseModel):
    """How long tool outputs are shortened (seed 002 ``tool_output_max_lines``).

    The short form is computed when a result arrives and applied at the next compaction point to
    every tool result outside the pinned head, so consecutive renders keep their prefix.
    """

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    max_lines: Annotated[int, pydantic.Field(gt=0)] | None = None
    max_tokens: Annotated[int, pydantic.Field(gt=0)] | None = None
    tail_share: Annotated[float, pydantic.Field(ge=0, lt=1)] = 0.2

    @property
    def active(self) -> bool:
        """True when results get a short form."""
        return self.enabled and (self.max_lines is not None or self.max_tokens is not None)


def _marker(position: int, full_tokens: int, what: str) -> str:
    return f"[... truncated: {what}; full output {full_tokens:,} tokens; restore: seq {position} ...]"


def cut_lines(
    text: str, max_lines: int, *, position: int, full_tokens: int, tail_share: float = 0.2
) -> str | None:
    """Return ``text`` cut to ``max_lines`` lines (head and tail around a marker), or None if it fits.

    Args:
        text: The output to shorten.
        max_lines: How many of its lines to keep.
        position: The position to restore the full output from (named in the marker).
        full_tokens: The full output's size (named in the marker).
        tail_share: The share of kept lines taken from the end.
    """
    lines = text.splitlines()
    if len(lines) <= max_lines:
        return None
    tail = int(max_lines * tail_share)
    head = max_lines - tail
    what = f"{len(lines) - max_lines:,} of {len(lines):,} lines omitted"
    kept = [
        *lines[:head],
        _marker(position, full_tokens, what),
        *(lines[len(lines) - tail :] if tail else []),
    ]
    return "\n".join(kept)


def cut_tokens(
    text: str,
    max_tokens: int,
    counter: TokenCounter,
    *,
    position: int,
    full_tokens: int,
    tail_share: float = 0.2,
    known: int | None = None,
) -> tuple[str, int]:
    """Return ``text`` cut to at most ``max_tokens`` tokens (head and tail around a marker) and its count.

    Characters are cut in proportion to the text's token density, then shrunk until the count fits;
    the result is counted through the port, so its size is exact. ``known`` is the text's count
    when the caller has it already.
    """
    count = counter.count(text) if known is None else known
    if count <= max_tokens:
        return text, count
    keep = int(len(text) * max_tokens / max(count, 1) * 0.9)
    for _ in range(_MAX_ROUNDS):
        tail = int(keep * tail_share)
        head = keep - tail
        omitted = len(text) - keep
        marker = _marker(position, full_tokens, f"{omitted:,} of {len(text):,} characters omitted")
        cut = text[:head] + "\n" + marker + ("\n" + text[len(text) - tail :] if tail else "")
        count = counter.count(cut)
        if count <= max_tokens:
            return cut, count
        keep = int(keep * max_tokens / count * 0.8)
    marker = _marker(position, full_tokens, f"all {len(text):,} characters omitted")
    return marker, counter.count(marker)


def shorten(
    text: str,
    limit_lines: int | None,
    limit_tokens: int | None,
    counter: TokenCounter,
    *,
    position: int,
    full: int,
    tokens: int,
) -> tuple[str, int] | None:
    """Return the short form of ``text`` (whose count is ``tokens``) and its count, or None if it fits."""
    current = text
    changed = False
    if limit_lines is not None:
        cut = cut_lines(current, limit_lines, position=position, full_tokens=full)
        if cut is not None:
            current, changed = cut, True
    if limit_tokens is not None and (changed or tokens > limit_tokens):
        known = None if changed else tokens
        cut_text, count = cut_tokens(
            current, limit_tokens, counter, position=position, full_tokens=full, known=known
        )
        return cut_text, count
    if not changed:
        return None
    return current, counter.count(current)


class TruncationReducer:
    """At a compaction point, shows precomputed short forms: cuts to the per-message cap, then truncations.

    A message over the budget's per-message cap (``Budget.message_tokens``) shows its cut form,
    pinned or not; every long result of an unpinned group outside the head shows its truncation
    short form. Both were computed on arrival; neither is applied to a context that never reached
    a compaction point.
    """

    name = "truncation"

    def __init__(self, config: TruncationConfig) -> None:
        """Apply ``config``."""
        self.config = config

    def reduce(
        self, context: WorkingContext, budget: Budget, state: RenderState
    ) -> tuple[WorkingContext, RenderState]:
        """Swap in short forms (also over a cap truncation); stubbed entries stay as they are."""
        cap = budget.message_tokens
        for i, group in enumerate(context.groups):
            if not any(e.short_text is not None and e.kind != "stub" for e in group.entries):
                continue
            truncate = self.config.active and not group.head and pin_reason(group, state) is None
            entries = tuple(_shortened(e, cap, truncate=truncate) for e in group.entries)
            if entries != group.entries:
                replace_entries(context, i, entries, state.pending_tokens)
        return context, state


def _shortened(entry: Entry, cap: int, *, truncate: bool) -> Entry:
    if entry.short_text is None or entry.kind == "stub":
        return entry
    over = entry.tokens > cap
    if not over and not truncate:
        return entry
    return msgspec.structs.replace(
        entry,
        kind="truncated",
        text=entry.short_text,
        tokens=entry.short_tokens + MESSAGE_OVERHEAD,
        rule="truncation" if truncate else "cap",
        short_text=None,
    )
