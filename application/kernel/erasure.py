"""``forget``: erase one session for good, leaving a tombstone that says who erased it, when and why."""

from __future__ import annotations

from contextledger.application.kernel.messages import check_session_id
from contextledger.application.kernel.wiring import Ports
from contextledger.domain.errors import EncryptionRequiredError, InvalidMessageError
from contextledger.domain.events import SessionForgotten

__all__ = ["MAX_REASON_CHARS", "forget_session"]

MAX_REASON_CHARS = 2_000
"""The longest reason (or ``by``) a tombstone keeps."""


def _field(value: object, what: str, *, required: bool) -> str:
    if not isinstance(value, str) or (required and not value.strip()):
        msg = f"forget needs {what} as {'non-empty ' if required else ''}text, not {value!r:.80}"
        raise InvalidMessageError(msg)
    if len(value) > MAX_REASON_CHARS:
        msg = f"{what} may have at most {MAX_REASON_CHARS:,} characters, not {len(value):,}"
        raise InvalidMessageError(msg)
    return value


def forget_session(ports: Ports, session_id: object, *, reason: object, by: object) -> SessionForgotten:
    """Erase ``session_id``'s content for good (crypto-shredding) and return its tombstone.

    Raises:
        InvalidMessageError: an ill-typed session id, an empty reason or an ill-typed ``by``.
        EncryptionRequiredError: the ledger is not encrypted: nothing is erased (see ADR 30).
        SessionNotFoundError: no such session (``SessionForgottenError`` never: forgetting twice
            returns the first tombstone).
    """
    session_id = check_session_id(session_id)
    tombstone = SessionForgotten(
        session_id=session_id,
        reason=_field(reason, "a reason", required=True),
        by=_field(by, "who forgets (by)", required=False),
        at=ports.clock.now(),
    )
    if ports.eraser is None:
        msg = "this store cannot erase sessions"
        raise EncryptionRequiredError(msg)
    return ports.eraser.forget(session_id, tombstone)
