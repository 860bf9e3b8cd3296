"""The composition root: the one place that builds adapters and hands them to the use cases as ports."""

from __future__ import annotations

import functools

from contextledger.adapters.store.event_store import RecorderEventStore
from contextledger.adapters.store.factory import open_store, resolve_url
from contextledger.adapters.store.projections import RecorderProjections
from contextledger.adapters.system import SystemClock, UuidSource
from contextledger.adapters.tokenizers import get_counter
from contextledger.application.audit.call_recorder import CallRecorder
from contextledger.application.kernel.ledger import DEFAULT_BLOB_THRESHOLD, Ledger
from contextledger.application.kernel.wiring import Ports
from contextledger.application.render.renderer import Renderer
from contextledger.domain.ports import Clock, IdSource, NotificationWaiter, TokenizerFactory

__all__ = ["open_ledger", "recorder_for", "renderer_for"]


def _waiter_of(store: RecorderEventStore) -> NotificationWaiter:
    """The notification waiter fitting ``store`` (LISTEN/NOTIFY on PostgreSQL, polling elsewhere)."""
    from contextledger.adapters.store.notification_waiters import notification_waiter  # noqa: PLC0415 - start-up time

    return notification_waiter(store)


def _counters() -> TokenizerFactory:
    """``get_counter``, remembered by name for one ledger: its renderers and replays share each counter.

    A tiktoken counter loads its encoding on first use (~0.1 s, holding the GIL): every ``simulate`` and
    every renderer of the ledger loaded it again, though an encoding never changes.
    """
    return functools.cache(get_counter)


def open_ledger(
    url: str | None = None,
    *,
    clock: Clock | None = None,
    ids: IdSource | None = None,
    tokenizers: TokenizerFactory | None = None,
    blob_threshold: int = DEFAULT_BLOB_THRESHOLD,
    key_file: str | None = None,
) -> Ledger:
    """Open the ledger at ``url`` (or ``$CONTEXTLEDGER_DB``, or ``sqlite:///contextledger.db``).

    URLs: ``sqlite:///path.db`` (embedded default), ``postgresql://user@host:5432/db`` (add
    ``?schema=name`` for a schema), ``memory://`` (tests and demos). ``clock``, ``ids`` and
    ``tokenizers`` replace the machine's clock, random ids and the tiktoken/heuristic counters (each counter
    is made once per ledger).
    With a key (``key_file``, ``$CONTEXTLEDGER_KEY_FILE`` or ``$CIPHER_KEY``: base64 of 16, 24 or 32
    bytes) the ledger is encrypted at rest, and ``Ledger.forget`` can erase a session.
    """
    store = open_store(resolve_url(url), key_file=key_file)
    views = RecorderProjections(store)
    ports = Ports(
        projections=views,
        notifications=views,
        health=views,
        waiter=lambda: _waiter_of(store),
        log=store,
        blobs=store,
        token_counts=store,
        snapshots=store,
        eraser=store,
        tokenizers=tokenizers or _counters(),
        clock=clock or SystemClock(),
        ids=ids or UuidSource(),
        close=store.close,
        url=store.url,
    )
    return Ledger(ports, blob_threshold=blob_threshold)


def renderer_for(ledger: Ledger, tokenizer: str = "cl100k_base") -> Renderer:
    """The renderer over ``ledger`` that commands render with, counting with ``tokenizer``."""
    return Renderer(ledger, tokenizer=tokenizer)


def recorder_for(ledger: Ledger) -> CallRecorder:
    """The ``model_calls`` recorder over ``ledger`` that commands record and read calls with."""
    return CallRecorder(ledger)
