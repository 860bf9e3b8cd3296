"""The rebuild use case: record a version's config, build it beside the live one, compare, switch, drop."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import msgspec
from contextledger.application.kernel.collector import collector_paused
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.rebuild.blue_green import (
    CONFIG_PREFIX,
    Comparison,
    RebuildSpec,
    compare_versions,
    record_config,
    version_summary,
)
from contextledger.application.rebuild.lease_wait import lease_names, wait_for_leases
from contextledger.application.rebuild.projection_runner import BatchDone
from contextledger.application.rebuild.render_digest import RenderDigest, digests_of
from contextledger.application.render.context_versions import CONTEXT_VIEW
from contextledger.application.views.view_runner import RunStats
from contextledger.domain.errors import ConfigError, ProjectionLockedError, ValidationError
from contextledger.domain.ports import NotificationReader, ProjectionStore

__all__ = [
    "RebuildResult",
    "ShardedBuild",
    "check_droppable",
    "check_switchable",
    "drop_version",
    "rebuild",
    "store_views",
]

ShardedBuild = Callable[[RebuildSpec, int], RunStats]
"""Builds a spec in that many worker processes (an adapter's; the processes open their own ledgers)."""


class RebuildResult(msgspec.Struct, frozen=True):
    """What a rebuild did: the version built, whether it was switched to, what was dropped, the comparison."""

    version: str
    switched: bool
    dropped: str | None
    comparison: Comparison | None
    """None when the rebuild was asked not to compare."""
    stats: RunStats
    workers: int
    active: bool = False
    """Whether the version serves after the rebuild: switched to, or active already before it."""


def store_views(ledger: Ledger) -> tuple[ProjectionStore, NotificationReader]:
    """The projection store and notification reader the composition root handed this ledger.

    Raises:
        ConfigError: the ledger's store keeps no projections.
    """
    views, reader = ledger.ports.projections, ledger.ports.notifications
    if views is None or reader is None:
        raise ConfigError("this ledger's store keeps no projections")
    return views, reader


def check_droppable(
    views: ProjectionStore, drop: str | None, *, building: str, switch_to: str | None = None
) -> None:
    """The one rule of dropping: only a built version that neither serves nor is being built is dropped.

    The version that serves (after ``switch_to``, if given) is never dropped, nor the one this rebuild
    builds (it would be built and deleted). A version is built while it has a checkpoint (its own or a
    shard's): a drop deletes them, so a second drop of the same version is refused, as a typo is.

    Raises:
        ValidationError: ``drop`` is (or would become) the active context version, is the version being
            built, or names no version this ledger holds (a typo or one dropped already, which would
            otherwise be reported as dropped).
    """
    if drop is None:
        return
    active = switch_to if switch_to is not None else views.active(CONTEXT_VIEW)
    if drop == active:
        how = "it is the version being switched to" if switch_to is not None else "switch first"
        raise ValidationError(f"{drop} is the active version: it is not dropped ({how})")
    if drop == building:
        raise ValidationError(f"{drop} is the version this rebuild builds: it is not dropped")
    held = any(name == drop or name.startswith(drop + "@") for name in views.checkpoints())
    if views.active(CONFIG_PREFIX + drop) is None or not held:
        raise ValidationError(
            f"{drop} is no context version of this ledger (or was dropped): nothing to drop"
        )


def drop_version(views: ProjectionStore, version: str) -> None:
    """Delete a version's rows, checkpoints and render digests (its recorded config stays in the registry)."""
    views.drop(version)
    views.drop(digests_of(version))


def check_switchable(version: str, failed: Mapping[str, str]) -> None:
    """Refuse to make active a version under which sessions cannot render (``render`` would fail for them).

    Raises:
        ValidationError: naming how many sessions failed, the first with its reason; nothing is switched.
    """
    if not failed:
        return
    first = min(failed)
    more = f" (and {len(failed) - 1:,} more)" if len(failed) > 1 else ""
    raise ValidationError(
        f"not switched: {len(failed):,} session(s) cannot render under {version}: "
        f"{first}: {failed[first]}{more}; the version is built but not active "
        "(a larger budget or another policy; --drop removes it)"
    )


def rebuild(
    ledger: Ledger,
    spec: RebuildSpec,
    *,
    switch: bool = False,
    drop: str | None = None,
    workers: int = 1,
    in_shards: ShardedBuild | None = None,
    on_batch: Callable[[BatchDone], None] | None = None,
    on_wait: Callable[[ProjectionLockedError], None] | None = None,
    compare: bool = True,
) -> RebuildResult:
    """Build the context version of ``spec`` beside the live one, compare them, then switch and drop.

    Order: the drop is checked first (nothing is written when it is refused), then the version's
    config is recorded, the version is built (in ``workers`` processes through ``in_shards`` when
    more than one), compared with the active version, made active with ``switch``, and ``drop`` is
    deleted (with its render digests); ``compare=False`` skips the comparison, and a one-process
    build from empty then writes no render digests (a later comparison renders those sessions from their
    rows).
    Readers keep the active version until the switch. Before building, leases a finishing
    runner still holds (the workers of a run killed with -9) are waited for, ``on_wait`` told once
    per holder; a dead holder's lease is taken over at once.

    With ``switch``, every session must render under the version (its render digests are made and checked
    even with ``compare=False``): a version under which any session fails is built but not made active.

    Raises:
        ValidationError: ``drop`` names the version that serves (or would serve after the switch), the one
            being built, or none this ledger holds; with ``switch``, sessions that cannot render under it.
        ConfigError: the ledger's store keeps no projections.
        ProjectionLockedError: a live runner still holds a lease after the wait (retry later).
    """
    views, reader = store_views(ledger)
    runner = spec.runner(ledger, reader, views)
    version = runner.projection
    check_droppable(views, drop, building=version, switch_to=version if switch else None)
    was_active = views.active(CONTEXT_VIEW) == version
    digests = compare or switch  # a switch checks every session renders: from the digests of the build
    checkpoints = runner.runner.checkpoints()
    shards = in_shards if workers > 1 else None
    if shards is None and not checkpoints.get(version):
        # A version folded from the start counts: every text (a first rebuild), or the derived texts of its
        # policy (a config change, whose audit views are at the head already). The encoding loads on the
        # tokenizer's thread while the leases and the config are written (their fsyncs), not on this one.
        runner.renderer.counter.warm()
    wait_for_leases(views, lease_names(checkpoints, workers), on_wait=on_wait)
    record_config(views, version, runner.projector.policy, spec.budget, spec.tokenizer)
    counts = None
    kept: dict[str, RenderDigest] | None = None  # the candidate's digests, kept by a one-process build
    if shards is not None:
        stats = shards(spec, workers)
    else:
        runner.on_batch = on_batch
        counts = runner.renderer.counter
        runner.context.counts_at_finish = False
        runner.context.digests_wanted = digests  # a version built from empty without one writes no digests
        runner.context.release_at_head = True  # memory holds the sessions in flight, not every session
        runner.context.keep_digests = digests  # compared from memory, not read back
        with collector_paused():  # the folded states are freed before the collector would walk them all
            stats = runner.run()
            # The last fresh counts are written once the leases are released (their release, a write
            # too, would have waited for this one), while the states are freed and the versions compared.
            counts.flush(aside=True)
            kept = runner.context.kept_digests
            del runner
        workers = 1
    try:
        comparison = compare_versions(ledger, views, version, kept=kept) if compare else None
        if switch and not was_active:  # the version that serves already: nothing is switched
            summary = (
                comparison.candidate if comparison else version_summary(ledger, views, version, kept=kept)
            )
            check_switchable(version, {**stats.failed, **summary.failed})
    finally:
        if counts is not None:
            counts.flush()  # waits for that write; raises its error
    if switch:
        views.activate(CONTEXT_VIEW, version)
    if drop is not None:
        drop_version(views, drop)
    return RebuildResult(version, switch, drop, comparison, stats, workers, active=switch or was_active)
