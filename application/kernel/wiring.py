"""The ports a use case is handed by the composition root, bundled so they travel together."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from contextledger.domain.ports import (
    BlobReader,
    Clock,
    EventLog,
    IdSource,
    NotificationReader,
    NotificationWaiter,
    ProjectionStore,
    SessionEraser,
    SnapshotStore,
    StoreHealth,
    TokenCountStore,
    TokenizerFactory,
)

__all__ = ["Ports"]


def _nothing() -> None:
    """Release nothing (ports that hold no connection)."""


@dataclass(frozen=True, kw_only=True)
class Ports:
    """Everything the application layer may reach outside itself; built once by ``open_ledger``.

    A single store object usually plays ``log``, ``blobs``, ``token_counts`` and ``snapshots``;
    tests hand fakes for any of them.
    """

    log: EventLog
    blobs: BlobReader
    token_counts: TokenCountStore
    snapshots: SnapshotStore
    tokenizers: TokenizerFactory
    clock: Clock
    ids: IdSource
    projections: ProjectionStore | None = None
    """Persistent views (checkpointed projections), when the store keeps them."""
    notifications: NotificationReader | None = None
    """Every stream's events in store order, when the store can list them."""
    eraser: SessionEraser | None = None
    """Erases sessions (``forget``), when the store can."""
    waiter: Callable[[], NotificationWaiter] | None = None
    """Opens a waiter that wakes a live tail when new notifications may exist (LISTEN/NOTIFY, polling)."""
    health: StoreHealth | None = None
    """The store's schema version and leases (``doctor``), when the store can say."""
    close: Callable[[], None] = field(default=_nothing)
    url: str = "?"
    """Where the log lives (for messages and reports)."""
