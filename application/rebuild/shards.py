"""``rebuild --shard i/n``: processes that share only the database each fold one share of the sessions.

Each process folds shard ``i`` of ``n`` under that shard's lease (``<view>@i/n``, a lease held in the
store: a PostgreSQL advisory lock, so processes on several hosts coordinate through the database) and
commits the shard's rows with its checkpoint, as ``rebuild --workers`` does in one host's processes.
A shard that finds every other shard folded and none still running completes the rebuild: it hands
each view's checkpoint over to the position all shards passed (``hand_over``), folds what came after it
in one unsharded pass, and compares the version with the live one. Every shard releases its lease
*before* looking at the others, so of two shards finishing together at least one sees both finished.
"""

from __future__ import annotations

import msgspec
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.rebuild.blue_green import (
    Comparison,
    RebuildSpec,
    compare_versions,
    record_config,
)
from contextledger.application.rebuild.lease_wait import wait_for_leases
from contextledger.application.rebuild.rebuild import (
    check_droppable,
    check_switchable,
    drop_version,
    store_views,
)
from contextledger.application.render.context_versions import CONTEXT_VIEW
from contextledger.application.views.view_runner import RunStats, Shard
from contextledger.domain.errors import ProjectionLockedError
from contextledger.domain.ports import Checkpoints, ProjectionCommit, ProjectionStore

__all__ = ["ShardResult", "hand_over", "rebuild_shard"]

_ATTEMPTS = 3
"""Times the completing shard tries to take the version's leases (each after waiting for them)."""


class ShardResult(msgspec.Struct, frozen=True):
    """What one shard did; ``comparison`` is set when this shard completed the rebuild."""

    version: str
    shard: str
    stats: RunStats
    pending: list[str]
    """Shards not folded yet, or still running (empty when this shard completed the rebuild)."""
    comparison: Comparison | None = None


def hand_over(store: Checkpoints, checkpoints: dict[str, int]) -> None:
    """Move each view's own checkpoint to the position all its shards passed (never back).

    Every session's row is then at least that far, so one unsharded runner (a live tail) goes on
    from there; rows it folds again come out the same.
    """
    commits = [
        ProjectionCommit(name, name, position, {})
        for name, position in checkpoints.items()
        if store.load_tracking(name) < position
    ]
    if commits:
        store.commit_many(commits)


def _pending(views: ProjectionStore, names: list[str], shard: Shard) -> tuple[list[str], dict[str, int]]:
    """The other shards not finished (never folded, or holding their lease) and each view's minimum."""
    pending: list[str] = []
    reached: dict[str, int] = {}
    for index in range(shard.count):
        other = Shard(index, shard.count)
        positions = {name: views.load_tracking(other.checkpoint(name)) for name in names}
        for name, position in positions.items():
            reached[name] = min(reached.get(name, position), position)
        label = f"{index + 1}/{shard.count}"
        if index == shard.index:
            continue
        if not all(positions.values()):
            pending.append(label)
            continue
        try:
            for name in names:
                views.acquire(other.checkpoint(name)).release()
        except ProjectionLockedError:
            pending.append(label)
    return pending, reached


def rebuild_shard(
    ledger: Ledger, spec: RebuildSpec, shard: Shard, *, switch: bool = False, drop: str | None = None
) -> ShardResult:
    """Fold one shard of ``spec``'s version; the last shard to finish completes the rebuild.

    The completing shard also switches to the version (``switch``) and drops ``drop``, as ``rebuild``
    does; a drop that would remove the serving version is refused before anything is folded.

    Raises:
        ValidationError: ``drop`` names the version that serves (or would serve after the switch), the one
            being built, or none this ledger holds; with ``switch``, sessions that cannot render under it
            (refused by the completing shard, which leaves the version built but not active).
        ConfigError: the ledger's store keeps no projections.
        ProjectionLockedError: another process folds this shard (or holds the version) right now.
    """
    views, reader = store_views(ledger)
    runner = spec.runner(ledger, reader, views, shard=shard)
    check_droppable(views, drop, building=runner.projection, switch_to=runner.projection if switch else None)
    record_config(views, runner.projection, runner.projector.policy, spec.budget, spec.tokenizer)
    runner.context.release_at_head = True  # memory holds this share's sessions in flight
    stats = runner.run()  # takes and releases this shard's leases
    label = f"{shard.index + 1}/{shard.count}"
    names = [view.name for view in runner.runner.views]
    pending, reached = _pending(views, names, shard)
    if pending:
        return ShardResult(runner.projection, label, stats, pending)
    whole = spec.runner(ledger, reader, views)
    for attempt in range(_ATTEMPTS):  # another shard completing at the same instant holds them briefly
        wait_for_leases(views, names)
        try:
            with whole.runner.leases():
                hand_over(views, reached)
                whole.catch_up()
            break
        except ProjectionLockedError:
            if attempt == _ATTEMPTS - 1:
                raise
    comparison = compare_versions(ledger, views, runner.projection)
    if switch and views.active(CONTEXT_VIEW) != runner.projection:
        # a session that failed to fold has no row (so no digest): this shard's own failures count too
        check_switchable(runner.projection, {**stats.failed, **comparison.candidate.failed})
        views.activate(CONTEXT_VIEW, runner.projection)
    if drop is not None:
        drop_version(views, drop)
    return ShardResult(runner.projection, label, stats, [], comparison)
