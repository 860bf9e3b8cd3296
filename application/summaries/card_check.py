"""A model summary checked against the session-state card: sent the card, retried once, or withheld."""

from __future__ import annotations

from typing import NamedTuple

import msgspec
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.kernel.logs import get_logger
from contextledger.domain.content import BlobText
from contextledger.domain.events import AssistantMessageAdded, UserMessageAdded
from contextledger.domain.ports import TokenCounter
from contextledger.projections.card import fit_card
from contextledger.projections.card_fidelity import CardCheck, check_against_card
from contextledger.projections.card_state import CardState, observe
from contextledger.projections.state import WorkingContext
from contextledger.projections.summary_requests import (
    Summarizer,
    SummaryDraft,
    SummaryRequest,
    check_summary_text,
)

__all__ = [
    "CARD_TOKENS",
    "CardOutcome",
    "card_for_summary",
    "card_state_at",
    "model_written",
    "summarize_against_card",
]

log = get_logger(__name__)

CARD_TOKENS = 1_500
"""The cap of the card a summarizer is sent (the card's own default cap)."""


def card_state_at(ledger: Ledger, session_id: str, position: int) -> CardState:
    """Return the card's state after the session's events up to ``position`` (the fold's own ``observe``)."""
    card = CardState()
    for recorded in ledger.events(session_id, upto=position):
        event = recorded.event
        full = None
        if isinstance(event, UserMessageAdded | AssistantMessageAdded) and isinstance(
            event.content, BlobText
        ):
            full = ledger.text(event.content)
        observe(card, recorded.position, event, full)
    return card


def card_for_summary(card: CardState, position: int, counter: TokenCounter) -> str:
    """Return the card a summarizer is sent: every section as if nothing were shown, without the index."""
    text, _ = fit_card(
        card, WorkingContext(), position, [], cap=CARD_TOKENS, count=counter.count, index=False
    )
    return text


class CardOutcome(NamedTuple):
    """The draft kept, its text, what it kept of the card, the calls made, and whether it is withheld."""

    draft: SummaryDraft
    text: str
    check: CardCheck
    drafts: int
    withheld: bool


def model_written(summarizer: Summarizer) -> bool:
    """Whether a model writes the summarizer's text (``model_written = True``: the HTTP model summarizers).

    Such a summarizer's drafts are retried when they lose the card, and its requests are held to the
    model's window (``RequestBuilder.parts``); the extractive one reads the span in process.
    """
    return bool(getattr(summarizer, "model_written", False))


def summarize_against_card(summarizer: Summarizer, request: SummaryRequest, card: CardState) -> CardOutcome:
    """Call ``summarizer``; check its text against ``card``; retry a model's low-fidelity draft once.

    A summarizer whose text a model writes (``model_written = True``: the HTTP model summarizers)
    that loses an instruction or a todo item of the span is asked again, told what it lost; if the
    second draft loses any too, the outcome is ``withheld``: recorded, never applied (the contexts
    keep the verbatim history and the card). Another summarizer's report is recorded as it is (the
    extractive one would give the same text again).
    """
    draft = summarizer.summarize(request)
    text = check_summary_text(draft.text)
    check = check_against_card(card, request.covers_from, request.covers_through, text)
    if not check.low or not model_written(summarizer):
        return CardOutcome(draft, text, check, 1, withheld=False)
    log.info("summary_low_fidelity", session_id=request.session_id, lost=len(check.lost), draft=1)
    draft = summarizer.summarize(msgspec.structs.replace(request, lost=check.lost))
    text = check_summary_text(draft.text)
    check = check_against_card(card, request.covers_from, request.covers_through, text)
    if check.low:
        log.warning("summary_withheld", session_id=request.session_id, lost=len(check.lost))
    return CardOutcome(draft, text, check, 2, withheld=check.low)
