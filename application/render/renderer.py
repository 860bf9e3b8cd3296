"""The render service: loads a session incrementally, counts through the token cache, folds and renders."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import msgspec
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.kernel.logs import get_logger
from contextledger.application.kernel.snapshots import SnapshotSlot
from contextledger.application.kernel.token_cache import CachedTokenCounter
from contextledger.application.render.context_rows import decode_row, encode_row
from contextledger.application.render.context_versions import (
    CONTEXT_VIEW,
    projection_version,
    rebuild_command,
)
from contextledger.application.render.counted_reader import CountedReader, Seen
from contextledger.application.render.session_heads import SessionHeads
from contextledger.domain.errors import (
    ConfigError,
    ContextLedgerError,
    EventDecodeError,
    ProjectionConfigError,
    TokenizerError,
    ValidationError,
)
from contextledger.domain.events import SummaryRecorded
from contextledger.domain.ports import TokenCounter
from contextledger.projections.context import RenderedContext
from contextledger.projections.counting import CountedEvent
from contextledger.projections.fold import Projector
from contextledger.projections.injection import InjectionHook, Placement, inject
from contextledger.projections.policy import Policy
from contextledger.projections.presets import as_policy
from contextledger.projections.render import MessageMemo
from contextledger.projections.state import RenderState

__all__ = ["Renderer"]

log = get_logger(__name__)

SNAPSHOT_EVERY = 1_000
"""Persist the folded state when at least this many events were folded since the last snapshot."""

SNAPSHOT_FORMAT = 8
"""Part of every snapshot's name: raise it when a change to the projection changes folded states."""


class _Cached(msgspec.Struct):
    """A folded state, the summary artifacts and tool names folded into it, and its last snapshot position.

    The tool names are gathered only under a policy whose retention names tools (``_check_tools``).
    """

    state: RenderState
    summaries: set[str]
    snapshot_at: int = 0
    tool_names: set[str] = msgspec.field(default_factory=set)


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(_Cached)


def _snapshot_name(key: tuple[str, ...]) -> str:
    return f"render/v{SNAPSHOT_FORMAT}/" + "/".join(key)


class Renderer:
    """Renders the context of a ledger session under a policy, incrementally.

    For each (session, policy, budget, tokenizer) it keeps the folded state in memory and catches up
    with only the events appended since (and summary artifacts that became available). Event texts
    are counted once through ``CachedTokenCounter`` (a blob's count is found by its address without
    reading it); blobs are read only for messages shown verbatim, or when the policy must cut them.

    Args:
        ledger: The ledger to read sessions from.
        tokenizer: A tokenizer name (resolved by the ledger's tokenizer port) or a ``TokenCounter``; a
            ``CachedTokenCounter`` is used as it is (its cache shared, e.g. by the replays of ``simulate``).
        max_states: How many folded states to keep (least recently used are forgotten).
        max_blobs: How many blob texts to keep in memory.
        snapshots: Persist folded states in the snapshot store (a projection runner keeps its own rows).
    """

    def __init__(
        self,
        ledger: Ledger,
        *,
        tokenizer: str | TokenCounter = "cl100k_base",
        max_states: int = 64,
        max_blobs: int = 256,
        snapshots: bool = True,
    ) -> None:
        """Wire the renderer to ``ledger`` and a cached counter over ``tokenizer``."""
        self.ledger = ledger
        if isinstance(tokenizer, CachedTokenCounter):
            self.counter = tokenizer
        else:
            if not isinstance(tokenizer, str) and not callable(getattr(tokenizer, "count", None)):
                msg = f"a tokenizer is a name (cl100k_base) or a TokenCounter, not {type(tokenizer).__name__}"
                raise TokenizerError(msg)
            base = ledger.ports.tokenizers(tokenizer) if isinstance(tokenizer, str) else tokenizer
            self.counter = CachedTokenCounter(base, ledger.ports.token_counts, ledger.ports.blobs)
        self._slot = SnapshotSlot(ledger.ports.snapshots)
        self._states: OrderedDict[tuple[str, ...], _Cached] = OrderedDict()
        self._rendered: dict[tuple[str, ...], tuple[RenderState, RenderedContext, MessageMemo]] = {}
        """The last context rendered per state key, with the state it came from (reused while unchanged)
        and the messages it built by entry (the next render reuses those of entries still shown)."""
        self._projectors: dict[tuple[str, ...], Projector] = {}
        self._by_identity: dict[tuple[int, int | None], tuple[Policy, Projector]] = {}
        """Projectors by policy object (kept alive here, so its id is not reused): policies are frozen,
        and a policy's fingerprint (its JSON) costs more than a warm render's own work."""
        self.reader = CountedReader(ledger, self.counter, max_blobs=max_blobs)
        self._heads = SessionHeads(ledger, max_states)
        self._persisted: dict[tuple[str, ...], int] = {}
        self._max_states = max_states
        self._warned: set[tuple[str, str]] = set()
        self._snapshots = snapshots

    def projector(self, policy: Policy | str = "default", *, budget: int | None = None) -> Projector:
        """Return the projector of a policy (preset name or ``Policy``), optionally with a prompt budget.

        Raises:
            ConfigError: an unknown preset, a policy that is neither a name nor a ``Policy``, or a budget
                that is not a whole number of tokens the window can hold.
        """
        chosen = as_policy(policy)
        seen = self._by_identity.get((id(chosen), budget))
        if seen is not None and seen[0] is chosen:  # the same frozen policy object: no fingerprint to compute
            return seen[1]
        key = (chosen.fingerprint(), str(budget))
        projector = self._projectors.get(key)
        if projector is None:
            limits = chosen.budget.build()
            if budget is not None:
                limits = limits.with_prompt_limit(budget)
            projector = self._projectors[key] = Projector(chosen, self.counter, budget=limits)
        if len(self._by_identity) >= self._max_states:
            self._by_identity.clear()
        self._by_identity[id(chosen), budget] = (chosen, projector)
        return projector

    def render(
        self,
        session_id: str,
        policy: Policy | str = "default",
        *,
        at: int | None = None,
        budget: int | None = None,
        hooks: Sequence[InjectionHook] = (),
        placement: Placement = "after_last_user",
    ) -> RenderedContext:
        """Return the context to send at position ``at`` (default: the last event) of a session.

        Args:
            session_id: The session.
            policy: A preset name or a ``Policy``.
            at: Render as of this position (summary artifacts produced later are not used).
            budget: Override the prompt budget (tokens a request may hold).
            hooks: Injection hooks, run after reduction within the injection reserve.
            placement: Where injected content goes.

        Raises:
            SessionNotFoundError: The session does not exist.
            ValidationError: ``at`` lies outside the session.
            PinnedOverBudgetError: The pinned items alone exceed the budget.
            ConfigError: The policy's ``retention.tools`` names a tool the session's schemas lack.
            InjectionOverflowError: A hook exceeded its reserve.
        """
        projector = self.projector(policy, budget=budget)
        state = self.state(session_id, projector, at=at)
        context = self._rendered_context(self._key(session_id, projector), projector, state)
        if hooks:
            context = inject(
                context,
                hooks,
                self.counter,
                injection_reserve=projector.budget.injection_reserve,
                placement=placement,
            )
        return context

    def _rendered_context(
        self, key: tuple[str, ...], projector: Projector, state: RenderState
    ) -> RenderedContext:
        """Render ``state``, or return the context rendered from this very state last time.

        ``Projector.render`` is a pure function of the state (and the blob texts it resolves, which
        never change), states are never changed in place, and a context is frozen: a warm request
        with no new event reuses the context instead of building it again. The last render's
        messages by entry go with it, which a render after new events reuses for the entries still shown.
        """
        last = self._rendered.pop(key, None)
        memo: MessageMemo = {} if last is None else last[2]
        if last is not None and last[0] is state:
            context = last[1]
        else:
            context = projector.render(state, self.reader.resolve, memo=memo)
        self._rendered[key] = (state, context, memo)
        if len(self._rendered) > self._max_states:
            del self._rendered[next(iter(self._rendered))]
        return context

    def state(self, session_id: str, projector: Projector, *, at: int | None = None) -> RenderState:
        """Return the folded state of a session at ``at`` (default: its last event), caught up incrementally.

        The state kept per (session, policy, budget, tokenizer) is the last one requested: moving
        forward folds only the new events; moving back refolds from the start. The returned state
        is shared with the cache: ``Projector.evolve`` and ``fold`` leave it unchanged.
        """
        head, summaries = self._heads.read(session_id)
        position = head if at is None else at
        if not 1 <= position <= head:
            raise ValidationError(f"position {position} is outside session {session_id!r} (1..{head})")
        return self._advance(session_id, projector, position, None, every=summaries)

    def fold_row(
        self,
        session_id: str,
        projector: Projector,
        at: int,
        stored: bytes | None,
        *,
        events: Sequence[CountedEvent] = (),
        summaries: list[SummaryRecorded] | None = None,
    ) -> bytes:
        """Catch a session's state up to ``at`` and return it as a projection row.

        ``stored`` is the row this method returned earlier (used when the state is not in memory).
        ``events``, contiguous and ending at ``at``, are the session's latest events already read
        and counted (``reader.count``): a catch-up starting inside them reads none again.
        ``summaries``, when given, are the artifacts recorded since the state was last folded, or
        all of them when there is no state yet (all are read again if a state must be refolded
        from the start). The bytes depend only on the folded state, so a rebuild from scratch
        gives the same row.
        """
        key = self._key(session_id, projector)
        if key not in self._states and stored is not None:
            try:
                row = decode_row(self.ledger, session_id, stored)
            except EventDecodeError as error:  # derived: an unreadable row only means folding from the log
                log.warning("projection_row_unreadable", session_id=session_id, problem=str(error))
            else:
                restored = _Cached(row.state, set(row.summaries), row.state.position, set(row.tool_names))
                self._persisted[key] = row.state.position
                self._remember(key, restored)
        if events:
            self.reader.preread[session_id] = events if isinstance(events, list) else list(events)
        try:
            state = self._advance(session_id, projector, at, summaries)
        finally:
            self.reader.preread.pop(session_id, None)
        cached = self._states[key]
        return encode_row(state, cached.summaries, cached.tool_names)

    def position_of(self, session_id: str, projector: Projector) -> int:
        """The position of the session's state kept in memory for ``projector``, 0 when none is kept."""
        cached = self._states.get(self._key(session_id, projector))
        return 0 if cached is None else cached.state.position

    def held(self, session_id: str, projector: Projector) -> RenderState | None:
        """The session's state kept in memory for ``projector`` (shared: not to be changed), or None."""
        cached = self._states.get(self._key(session_id, projector))
        return None if cached is None else cached.state

    def forget(self) -> None:
        """Drop every folded state kept in memory (the next request starts from a row or the log)."""
        self._states.clear()
        self._persisted.clear()
        self._rendered.clear()

    def release(self, session_id: str, projector: Projector) -> None:
        """Drop a session's state for ``projector`` from memory (later folded from a row, snapshot or log)."""
        key = self._key(session_id, projector)
        self._states.pop(key, None)
        self._persisted.pop(key, None)
        self._rendered.pop(key, None)

    def _advance(
        self,
        session_id: str,
        projector: Projector,
        position: int,
        recent: list[SummaryRecorded] | None,
        *,
        every: list[SummaryRecorded] | None = None,
    ) -> RenderState:
        """Catch the kept state up to ``position``.

        ``recent``, if given, are the only unseen artifacts; else ``every``, if given, are all of the
        session's artifacts, just read; else they are read here.
        """
        key = self._key(session_id, projector)
        summaries = recent if recent is not None else every
        if summaries is None:
            summaries = self.ledger.summaries(session_id)
        cached = self._states.get(key) or self._load_active(session_id, projector) or self._load_snapshot(key)
        if cached is None or not self._usable(cached, position, summaries):
            # Behind the request or missing an artifact due earlier: fold from the start (every artifact).
            if recent is not None and cached is not None:
                summaries = self.ledger.summaries(session_id)
            cached = _Cached(state=projector.start(), summaries=set())
        self._catch_up(session_id, projector, cached, position, summaries)
        self._check_tools(session_id, projector.policy, cached)
        if (
            self._snapshots
            and cached.state.position - max(cached.snapshot_at, self._persisted.get(key, 0)) >= SNAPSHOT_EVERY
        ):
            self._save_snapshot(key, cached)
        self._remember(key, cached)
        return cached.state

    def _key(self, session_id: str, projector: Projector) -> tuple[str, ...]:
        return (session_id, *projector.key)

    # -- internals ----------------------------------------------------------------------------

    def _check_tools(self, session_id: str, policy: Policy, cached: _Cached) -> None:
        """Refuse a policy whose ``retention.tools`` names a tool the session does not have.

        With tool schemas the session's tools are known: a name matching none of them (nor a
        tool it called) is a ``ConfigError``. Without schemas only the tools called so far are
        known, so an unmatched name is logged as a warning (once per session and policy).
        """
        if not policy.retention.tools:
            return
        state = cached.state
        known = {tool.name for tool in state.tools} | cached.tool_names
        source = f"policy {policy.name!r}"
        if state.tools:
            policy.check_tools(known, source=source)
            return
        try:
            policy.check_tools(known, source=source)
        except ConfigError as error:
            key = (session_id, policy.fingerprint())
            if key not in self._warned:
                self._warned.add(key)
                log.warning("policy_names_unknown_tools", session_id=session_id, problem=str(error))

    def _save_snapshot(self, key: tuple[str, ...], cached: _Cached) -> None:
        """Persist the state; snapshots are derived, so a failed write is logged, never raised."""
        if not self._slot.save(_snapshot_name(key), cached.state.position, _ENCODER.encode(cached)):
            return
        cached.snapshot_at = cached.state.position
        self._persisted[key] = cached.state.position

    def require_active(self, projector: Projector, policy_spec: str, budget: int | None) -> None:
        """Refuse to serve unless the active context projection was built under ``projector``'s config.

        Raises:
            ProjectionConfigError: it was built under another policy, budget or tokenizer (or none
                is active); the message names the command that rebuilds and activates it.
        """
        views = self.ledger.ports.projections
        active = None if views is None else views.active(CONTEXT_VIEW)
        running = projection_version(projector)
        if active != running:
            raise ProjectionConfigError(active or "(none)", running, rebuild_command(policy_spec, budget))

    def _load_active(self, session_id: str, projector: Projector) -> _Cached | None:
        """Return the session's row of the active context projection, if it was built under this config."""
        views = self.ledger.ports.projections
        if not self._snapshots or views is None:
            return None  # a projection runner folds its own version
        version = projection_version(projector)
        if views.active(CONTEXT_VIEW) != version:
            return None
        stored = views.load_row(version, session_id)
        if stored is None:
            return None
        try:
            row = decode_row(self.ledger, session_id, stored[1])
        except ContextLedgerError:
            return None  # derived: an unreadable row only means folding from the log
        return _Cached(row.state, set(row.summaries), 0, set(row.tool_names))

    def _load_snapshot(self, key: tuple[str, ...]) -> _Cached | None:
        """Return the persisted state of ``key`` (a later process catches up from it), or None."""
        if not self._snapshots:
            return None
        found = self._slot.load(
            _snapshot_name(key), _DECODER.decode, lambda cached, at: cached.state.position == at
        )
        if found is None:
            return None  # none, unreadable, or not the state it claims to be: refold from the log
        cached = found[1]
        cached.snapshot_at = cached.state.position
        self._persisted[key] = found[0]
        return cached

    @staticmethod
    def _usable(cached: _Cached, position: int, summaries: list[SummaryRecorded]) -> bool:
        """A cached state can be caught up unless it is ahead or missed an artifact now due earlier."""
        at = cached.state.position
        if at > position:
            return False
        return all(s.summary_id in cached.summaries or s.produced_at >= at for s in summaries)

    def _remember(self, key: tuple[str, ...], cached: _Cached) -> None:
        self._states[key] = cached
        self._states.move_to_end(key)
        while len(self._states) > self._max_states:
            self._states.popitem(last=False)

    def _catch_up(
        self,
        session_id: str,
        projector: Projector,
        cached: _Cached,
        position: int,
        summaries: list[SummaryRecorded],
    ) -> None:
        """Fold the events after the cached state up to ``position`` (and the artifacts due) in one pass.

        ``fold`` is pure: if reading or folding fails, the cached state is left as it was.
        """
        due: dict[int, list[SummaryRecorded]] = {}
        for summary in summaries:
            if summary.summary_id not in cached.summaries and summary.produced_at <= position:
                due.setdefault(summary.produced_at, []).append(summary)
        if cached.state.position == position and not due:
            return  # nothing to fold: no copy of the state
        seen = Seen(tools=set() if projector.policy.retention.tools else None)  # only its check needs them
        span = (cached.state.position, position)
        with self.counter.saves_held():  # the counts this fold makes are written once, after it
            events = self.reader.counted(session_id, projector, span, due, seen)
            cached.state = projector.fold(events, cached.state)
        cached.summaries |= seen.summaries
        if seen.tools:
            cached.tool_names |= seen.tools
