"""Blue/green context projections: build a version beside the live one, compare, switch, serve a match."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping

import msgspec
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.rebuild.audit_views import audit_views
from contextledger.application.rebuild.projection_runner import BatchDone, ProjectionRunner
from contextledger.application.rebuild.render_digest import (
    RenderDigest,
    decode_digest,
    digests_of,
    failed_digest,
    state_digest,
)
from contextledger.application.render.context_rows import row_state
from contextledger.application.render.context_versions import (
    CONFIG_PREFIX,
    CONTEXT_VIEW,
    projection_version,
    rebuild_command,
)
from contextledger.application.render.renderer import Renderer
from contextledger.application.views.view_runner import BATCH_SIZE, Shard
from contextledger.domain.errors import ConfigError, ContextLedgerError
from contextledger.domain.ports import NotificationReader, ProjectionStore, VersionRegistry
from contextledger.projections.policy import Policy
from contextledger.projections.state import RenderState

__all__ = [
    "CONFIG_PREFIX",
    "Comparison",
    "RebuildSpec",
    "VersionSummary",
    "active_config",
    "active_state",
    "build_version",
    "compare_versions",
    "rebuild_command",
    "record_config",
    "version_summary",
]


class VersionSummary(msgspec.Struct, frozen=True):
    """One projection version rendered: sessions, total tokens, evicted events by rule, failed sessions."""

    version: str
    policy: str
    sessions: int
    tokens: int
    evictions: dict[str, int]
    failed: dict[str, str]


class Comparison(msgspec.Struct, frozen=True):
    """A candidate version against the live one: both summaries and the sessions whose renders differ.

    ``live_behind``: how many notifications the live version's checkpoint lags the candidate's. Its rows
    are then renders of older positions for the sessions that grew since: they count as differing though
    both policies may render their heads alike (the next catch-up of the live version closes the gap).
    """

    live: VersionSummary | None
    candidate: VersionSummary
    differing: list[str]
    live_behind: int = 0


class RebuildSpec(msgspec.Struct, frozen=True):
    """What a (shard of a) rebuild folds: one context version, plus the policy-free views if asked.

    Plain data, so that worker processes can be handed one.
    """

    policy: str
    """The policy as JSON (``Policy.model_dump_json``)."""
    budget: int | None = None
    tokenizer: str = "cl100k_base"
    projection: str | None = None
    """The version's name (default: derived from policy, budget and tokenizer)."""
    audit_views: tuple[str, ...] = ()
    """Further views kept by the same pass: any of ``summaries``, ``calls``, ``search``."""
    batch_size: int = BATCH_SIZE
    """Notifications per transaction."""
    views_suffix: str = ""
    """Appended to those views' names (a benchmark or test rebuilds them under fresh names)."""

    def runner(
        self,
        ledger: Ledger,
        reader: NotificationReader,
        views: ProjectionStore,
        *,
        shard: Shard | None = None,
        on_batch: Callable[[BatchDone], None] | None = None,
    ) -> ProjectionRunner:
        """Return the runner of this spec (one shard of it) over ``ledger``'s store."""
        policy = Policy.model_validate_json(self.policy)
        return ProjectionRunner(
            ledger,
            reader,
            views,
            policy=policy,
            budget=self.budget,
            tokenizer=self.tokenizer,
            projection=self.projection,
            shard=shard,
            on_batch=on_batch,
            batch_size=self.batch_size,
            also=audit_views(ledger, views, self.audit_views, suffix=self.views_suffix),
        )


def record_config(
    views: VersionRegistry, version: str, policy: Policy, budget: int | None, tokenizer: str
) -> None:
    """Record the config a version is built under (``compare_versions`` and serving read it)."""
    config = {"policy": policy.fingerprint(), "budget": budget, "tokenizer": tokenizer}
    views.activate(CONFIG_PREFIX + version, json.dumps(config, sort_keys=True))


def build_version(
    ledger: Ledger,
    reader: NotificationReader,
    views: ProjectionStore,
    *,
    policy: Policy,
    budget: int | None = None,
    tokenizer: str = "cl100k_base",
    on_batch: Callable[[BatchDone], None] | None = None,
) -> ProjectionRunner:
    """Record the version's config, then build (or catch up) its rows; readers keep the active version."""
    runner = ProjectionRunner(ledger, reader, views, policy=policy, budget=budget, tokenizer=tokenizer)
    runner.on_batch = on_batch
    record_config(views, runner.projection, policy, budget, tokenizer)
    runner.run()
    return runner


def active_config(views: VersionRegistry | None) -> tuple[Policy, int | None, str] | None:
    """The policy, budget and tokenizer the active context projection was built under (None: none active)."""
    version = None if views is None else views.active(CONTEXT_VIEW)
    if views is None or version is None:
        return None
    return _config(views, version)


def _config(views: VersionRegistry, version: str) -> tuple[Policy, int | None, str]:
    raw = views.active(CONFIG_PREFIX + version)
    if raw is None:
        msg = f"projection version {version!r} has no recorded config (build it with `contextledger rebuild`)"
        raise ConfigError(msg)
    config = json.loads(raw)
    return Policy.model_validate_json(config["policy"]), config["budget"], str(config["tokenizer"])


def _digests(
    ledger: Ledger, views: ProjectionStore, version: str, kept: Mapping[str, RenderDigest] | None = None
) -> tuple[VersionSummary, dict[str, bytes]]:
    """Summarize a version from the digests its build wrote; return its summary and each session's hash.

    ``kept``: digests the caller's build wrote and still holds, each the one stored beside its session's
    row; only the sessions it lacks are read. A session without a readable digest (a version built before
    digests) is rendered from its row.
    """
    policy, budget, tokenizer = _config(views, version)
    keys = views.row_keys(version)
    rowless = set(views.row_keys(digests_of(version))).difference(keys)
    if rowless:  # a session whose fold failed has no row, only a failed digest: it counts, and it fails
        keys = sorted([*keys, *rowless])
    held = kept or {}
    unread = [k for k in keys if k not in held]
    stored = views.load_rows(digests_of(version), unread) if unread else {}
    digests: dict[str, RenderDigest | None] = {k: decode_digest(data) for k, (_, data) in stored.items()}
    digests.update((k, held[k]) for k in keys if k in held)
    missing = [k for k in keys if digests.get(k) is None]
    if missing:
        projector = Renderer(ledger, tokenizer=tokenizer, snapshots=False).projector(policy, budget=budget)
        for key in missing:
            row = views.load_row(version, key)
            if row is None:
                continue
            try:
                digests[key] = state_digest(projector, row_state(ledger, key, row[1]))
            except ContextLedgerError as error:
                digests[key] = failed_digest(str(error))
    tokens = 0
    evictions: Counter[str] = Counter()
    failed: dict[str, str] = {}
    messages: dict[str, bytes] = {}
    for key in keys:
        digest = digests.get(key)
        if digest is None:
            continue
        if digest.failed:
            failed[key] = digest.failed
            continue
        tokens += digest.tokens
        evictions.update(digest.evictions)
        messages[key] = digest.messages
    summary = VersionSummary(version, policy.name, len(keys), tokens, dict(sorted(evictions.items())), failed)
    return summary, messages


def version_summary(
    ledger: Ledger, views: ProjectionStore, version: str, *, kept: Mapping[str, RenderDigest] | None = None
) -> VersionSummary:
    """One version's summary from its render digests (``kept``: those its build holds), no comparison."""
    return _digests(ledger, views, version, kept)[0]


def compare_versions(
    ledger: Ledger,
    views: ProjectionStore,
    candidate: str,
    *,
    kept: Mapping[str, RenderDigest] | None = None,
) -> Comparison:
    """Compare ``candidate`` with the active version (if any): tokens, evictions, differing renders.

    Both are read from the render digests their builds wrote beside their rows (``render_digest``);
    ``kept`` holds candidate digests the caller's build wrote and kept (``ContextView.kept_digests``), which
    are not read back.
    """
    new, new_messages = _digests(ledger, views, candidate, kept)
    live_version = views.active(CONTEXT_VIEW)
    if live_version is None:
        return Comparison(None, new, [])
    if live_version == candidate:  # the version that serves, rebuilt: it is the live one, identical to itself
        return Comparison(new, new, [])
    live, live_messages = _digests(ledger, views, live_version)
    differing = sorted(
        k for k in new_messages.keys() | live_messages.keys() if new_messages.get(k) != live_messages.get(k)
    )
    checkpoints = views.checkpoints()
    behind = max(0, checkpoints.get(candidate, 0) - checkpoints.get(live_version, 0))
    return Comparison(live, new, differing, behind)


def active_state(
    ledger: Ledger,
    views: ProjectionStore,
    session_id: str,
    *,
    policy: Policy,
    policy_spec: str,
    budget: int | None = None,
    tokenizer: str = "cl100k_base",
) -> RenderState | None:
    """Return a session's state from the active context projection, which must match the running config.

    Raises:
        ProjectionConfigError: the active version was built under another config (names the rebuild command).
    """
    renderer = Renderer(ledger, tokenizer=tokenizer, snapshots=False)
    projector = renderer.projector(policy, budget=budget)
    renderer.require_active(projector, policy_spec, budget)
    row = views.load_row(projection_version(projector), session_id)
    return None if row is None else row_state(ledger, session_id, row[1])
