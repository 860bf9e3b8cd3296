"""The store's guards: driver errors re-raised as the package's ``StoreError`` tree, names refused alike."""

from __future__ import annotations

from collections.abc import Iterable

import msgspec
from contextledger.domain.errors import (
    ContextLedgerError,
    InvalidMessageError,
    StoreError,
    StoreUnavailableError,
)
from eventsourcing.persistence import InterfaceError, OperationalError, PersistenceError

__all__ = ["Storable", "refuse_nul", "refuse_nul_in", "storable", "translated"]


class translated:  # noqa: N801  # used as the function it was: ``with translated(action):``
    """Re-raise driver and eventsourcing errors as ``StoreError`` subclasses.

    A class, not a ``@contextmanager`` generator: every append enters one, and a generator context
    manager costs a generator, its frame and two ``next`` calls per use (ADR 0052). The mapping is the
    generator's, clause for clause (``test_translated_maps_as_the_generator_did``).
    """

    __slots__ = ("action",)

    def __init__(self, action: str) -> None:
        self.action = action

    def __enter__(self) -> None:
        """Nothing to set up."""
        return

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, _tb: object) -> None:
        """Re-raise ``error`` as the package's error for it; an error of the package passes as it is."""
        if error is None or isinstance(error, ContextLedgerError):
            return
        action = self.action
        if isinstance(error, (OperationalError, InterfaceError)):
            msg = f"{action}: database unavailable: {error}"
            raise StoreUnavailableError(msg) from error
        if isinstance(error, PersistenceError):
            msg = f"{action}: {error}"
            raise StoreError(msg) from error
        if isinstance(error, OSError):
            msg = f"{action}: {error}"
            raise StoreUnavailableError(msg) from error
        if isinstance(error, UnicodeEncodeError):
            where = f"({error.reason} at {error.start})"
            msg = f"{action}: a text is not valid Unicode {where}; nothing was written"
            raise InvalidMessageError(msg) from None


class Storable:
    """Re-raise a value the encoder refuses as the caller's ``InvalidMessageError`` (nothing was written).

    A class for the reason ``translated`` is one; ``storable()`` returns its one instance (it holds no
    state).
    """

    __slots__ = ()

    def __enter__(self) -> None:
        """Nothing to set up."""
        return

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, _tb: object) -> None:
        """Re-raise an encoder's refusal as ``InvalidMessageError``."""
        if isinstance(error, (TypeError, ValueError, OverflowError, msgspec.EncodeError)):
            msg = f"an event holds a value that cannot be stored ({error}); use text, numbers, lists, objects"
            raise InvalidMessageError(msg) from None


_STORABLE = Storable()


def storable() -> Storable:
    """The context in which encoding runs (``Storable``)."""
    return _STORABLE


def refuse_nul(stream_ids: Iterable[str], keys: Iterable[str | None]) -> None:
    """Session ids and idempotency keys are names: a NUL in one is refused alike on every backend."""
    for name, values in (("session id", stream_ids), ("idempotency key", keys)):
        for value in values:
            if value is not None and "\x00" in value:
                msg = f"a {name} may not contain NUL (\\x00): {value!r}"
                raise InvalidMessageError(msg)


def refuse_nul_in(stream_id: str, key: str | None, snapshot: tuple[str, int, bytes] | None) -> None:
    """``refuse_nul`` of an append's names, its lists built only when a name could be refused (ADR 0052)."""
    if snapshot is not None or "\x00" in stream_id or (key is not None and "\x00" in key):
        refuse_nul([stream_id] if snapshot is None else [stream_id, snapshot[0]], [key])
