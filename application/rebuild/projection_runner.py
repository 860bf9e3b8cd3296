"""The checkpointed context projection: a ``ViewRunner`` over one ``ContextView``, committed per batch."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from contextledger.application.kernel.ledger import Ledger
from contextledger.application.rebuild.context_view import ContextView
from contextledger.application.render.context_versions import CONTEXT_VIEW, projection_version
from contextledger.application.render.renderer import Renderer
from contextledger.application.views.view_runner import (
    BATCH_SIZE,
    BatchDone,
    RunStats,
    Shard,
    View,
    ViewRunner,
)
from contextledger.domain.ports import NotificationReader, NotificationWaiter, ProjectionStore, TokenCounter
from contextledger.projections.fold import Projector
from contextledger.projections.policy import Policy

__all__ = [
    "BATCH_SIZE",
    "CONTEXT_VIEW",
    "BatchDone",
    "ContextView",
    "ProjectionRunner",
    "RunStats",
    "projection_version",
]


class ProjectionRunner:
    """Keeps one context projection version (policy, budget, tokenizer) up to date, checkpointed.

    A ``ViewRunner`` over one ``ContextView``: each batch of notifications is folded per touched
    session, then the touched sessions' rows and the checkpoint are committed in ONE transaction;
    after a crash the runner resumes after the last committed batch. One runner per checkpoint.

    Args:
        ledger: The ledger whose sessions are folded.
        reader: Notifications of every stream in store order.
        views: Where rows, tracking and the lease live.
        policy: A preset name or ``Policy``.
        budget: Prompt budget override.
        tokenizer: Tokenizer name or counter.
        batch_size: Notifications per transaction.
        projection: The version name (default: ``projection_version`` of the projector).
        on_batch: Called after each committed batch (progress bars).
        max_states: Folded states kept in memory (others are reloaded from their rows).
        shard: Which share of the sessions this runner folds (several processes rebuild at once).
        also: Further views kept by the same reads and transactions (summaries, calls, search).
    """

    def __init__(
        self,
        ledger: Ledger,
        reader: NotificationReader,
        views: ProjectionStore,
        *,
        policy: Policy | str = "default",
        budget: int | None = None,
        tokenizer: str | TokenCounter = "cl100k_base",
        batch_size: int = BATCH_SIZE,
        projection: str | None = None,
        on_batch: Callable[[BatchDone], None] | None = None,
        max_states: int = 8_192,
        shard: Shard | None = None,
        also: Sequence[View] = (),
    ) -> None:
        """Wire the runner; nothing is read until ``run``."""
        self.context = ContextView(
            ledger,
            views,
            policy=policy,
            budget=budget,
            tokenizer=tokenizer,
            projection=projection,
            max_states=max_states,
            shard=shard,
        )
        self.runner = ViewRunner(
            reader, views, [self.context, *also], batch_size=batch_size, shard=shard, on_batch=on_batch
        )

    @property
    def projection(self) -> str:
        """The context version's name."""
        return self.context.name

    @property
    def projector(self) -> Projector:
        """The projector the view folds with."""
        return self.context.projector

    @property
    def renderer(self) -> Renderer:
        """The renderer whose fold the view uses."""
        return self.context.renderer

    @property
    def on_batch(self) -> Callable[[BatchDone], None] | None:
        """The progress callback."""
        callback: Callable[[BatchDone], None] | None = self.runner.on_batch
        return callback

    @on_batch.setter
    def on_batch(self, callback: Callable[[BatchDone], None] | None) -> None:
        self.runner.on_batch = callback

    def run(self) -> RunStats:
        """Take the leases, fold every notification after the checkpoints, release the leases."""
        return self.runner.run()

    def catch_up(self) -> RunStats:
        """Fold and commit batches until nothing is left after the checkpoints."""
        return self.runner.catch_up()

    def follow(
        self,
        *,
        stop: Callable[[], bool],
        waiter: NotificationWaiter | None = None,
        poll: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> RunStats:
        """Catch up, then tail new notifications until ``stop()``."""
        return self.runner.follow(stop=stop, waiter=waiter, poll=poll, sleep=sleep)
