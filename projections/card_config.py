"""The session-state card's settings in a policy."""

from __future__ import annotations

import math
from typing import Annotated, Literal

import pydantic
from contextledger.projections.budget import Budget

__all__ = ["HISTORY_AS_OF", "HISTORY_LATEST", "CardConfig"]

HISTORY_LATEST = "latest"
"""The history line names the user's latest message by position (ADR 0090)."""
HISTORY_AS_OF = "as-of"
"""The history line names the current request as of the note, newer requests excepted (ADR 0093)."""


class CardConfig(pydantic.BaseModel):
    """The session-state card: a block the fold derives from the log and renders in every context.

    Attributes:
        enabled: Render the card at all (False gives the contexts of the policy without a card).
        placement: ``prefix`` keeps it in the stable prefix after the summaries, refreshed only at
            compaction points (no extra cache break); ``tail`` rewrites it after every event at the
            end of the context (never cached; kept to measure the difference).
        max_tokens: The card's own cap in tokens.
        max_fraction: The card may use at most this fraction of the budget's target.
        files: Paths listed per list (files changed, files read), the newest.
        decisions: Decisions listed, the newest.
        errors: Errors with their resolutions listed, the newest.
        history_note: Open the card with a line that marks the earlier requests shown above it (a pinned
            first task, kept user turns) as history when the session went on after them, naming the
            user's latest message (ADR 0090). Off in a bare ``CardConfig`` (records made before it replay
            byte for byte, and its policies keep their fingerprints); on in every preset.
        history_as_of: With ``history_note``, name the current request as of the note ("their last one:
            seq N when this note was written, unless they asked for something after it"): the note stays
            true when a user message arrives before the card is next refreshed. Off, the note says "The
            user's latest message is seq N", which such a message made stale (ADR 0093); on in every preset.
    """

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    placement: Literal["prefix", "tail"] = "prefix"
    max_tokens: Annotated[int, pydantic.Field(gt=0)] = 1_500
    max_fraction: Annotated[float, pydantic.Field(gt=0, le=1)] = 0.1
    files: Annotated[int, pydantic.Field(ge=0)] = 40
    decisions: Annotated[int, pydantic.Field(ge=0)] = 30
    errors: Annotated[int, pydantic.Field(ge=0)] = 8
    history_note: bool = False
    history_as_of: bool = False

    @property
    def history_wording(self) -> str:
        """How the card's history line is worded: "" (no line), ``HISTORY_LATEST`` or ``HISTORY_AS_OF``."""
        if not self.history_note:
            return ""
        return HISTORY_AS_OF if self.history_as_of else HISTORY_LATEST

    def cap(self, budget: Budget) -> int:
        """Return the card's tier cap under ``budget``: the smaller of its two limits."""
        return min(self.max_tokens, math.floor(budget.target * self.max_fraction))
