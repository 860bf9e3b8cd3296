"""Which replies a call takes: its own, while no other reply has moved the session past its context."""

from __future__ import annotations

from contextledger.application.kernel.ledger import Ledger
from contextledger.domain.errors import ValidationError
from contextledger.domain.events import AssistantMessageAdded

__all__ = ["check_current"]


def check_current(ledger: Ledger, session_id: str, call_id: str, position: int) -> None:
    """Refuse a first reply to a call rendered at ``position`` when another reply has since followed it.

    A request that timed out and was retried, its late reply recorded after the retry's turn: it was
    appended after that turn, and the Anthropic wire merged the two assistant messages (with thinking on,
    into one the API refuses). Recording the same reply again stays a no-op (its idempotency key).

    Raises:
        ValidationError: the session holds an assistant reply after the call's context ended.
    """
    if ledger.log.lookup_idempotency_key(session_id, f"reply:{call_id}") is not None:
        return
    later = next(
        (
            r.position
            for r in ledger.events(session_id, after=position)
            if isinstance(r.event, AssistantMessageAdded)
        ),
        None,
    )
    if later is not None:
        msg = (
            f"call {call_id!r} was rendered at position {position}, and the session has a reply after it "
            f"(position {later}): its late reply is not taken; make a new request"
        )
        raise ValidationError(msg)
