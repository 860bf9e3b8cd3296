"""What-if simulation: replay recorded sessions under several policies and price every call's prompt cache."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import datetime

import msgspec
from contextledger.application.audit.session_replay import ReplayedCall, replay_calls
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.kernel.token_cache import CachedTokenCounter
from contextledger.application.rebuild.fact_tracking import FactFate, FactTracker, entered_at
from contextledger.domain.errors import ContextLedgerError, ValidationError
from contextledger.domain.events import AssistantMessageAdded
from contextledger.domain.ports import TokenCounter
from contextledger.projections.cache_metrics import UnitMemo, units_of
from contextledger.projections.context import RenderedContext
from contextledger.projections.policy import Policy
from contextledger.projections.provider_cache import CacheSimulator, ProviderCache
from contextledger.projections.summary_requests import Summarizer

__all__ = [
    "FactDifference",
    "FactFate",
    "PolicyTotals",
    "SimulatedCall",
    "Simulation",
    "simulate",
]


def _evicted(context: RenderedContext) -> dict[int, str]:
    """Return the evicted positions of a render, each with the rule that evicted it.

    A position a message shows whole is never evicted, though an evicting decision's range covers it (the
    call of a step group whose result was stubbed; a group whose late result spans a dropped run). A
    message shown cut or stubbed is evicted by the decision of its own action that covers it (its group's),
    else by its kind (a pinned message cut). Every other position by the best decision covering it, a
    summary before a drop, as ``dispositions_of`` ranks them. Linear in the positions the decisions cover.
    """
    whole: set[int] = set()
    cut: dict[int, str] = {}
    for message in context.messages:
        action = _CUT.get(message.kind)
        if message.kind == "message":
            whole.update(message.sources)
        elif action is not None:
            cut.update(dict.fromkeys(message.sources, action))
    out: dict[int, str] = {}
    rank: dict[int, int] = {}
    for decision in context.decisions:
        ranked = _EVICTED_RANK.get(decision.action)
        if ranked is None:
            continue
        for position in range(decision.first, decision.last + 1):
            if position in whole or cut.get(position, decision.action) != decision.action:
                continue
            if ranked < rank.get(position, len(_EVICTED_RANK)):
                out[position], rank[position] = decision.rule, ranked
    for position, action in cut.items():
        out.setdefault(position, action)
    return out


_CUT = {"stub": "stubbed", "truncated": "truncated"}
"""The action of a message shown changed, by its kind."""
_EVICTED_RANK = {"summarized": 0, "dropped": 1, "stubbed": 2, "truncated": 3}
"""Which decision evicts a position several cover: the first of these (``dispositions_of``'s precedence)."""


class SimulatedCall(msgspec.Struct, frozen=True, kw_only=True):
    """One model-call point of a recorded session as ``policy`` would have sent it.

    ``position`` numbers the call as ``show``, ``calls`` and ``why`` do: the log position of the last
    event the call shows (the assistant message it is made for comes next); ``at`` is that message's
    time. ``cost`` is in input-token equivalents under the provider cache model
    (``ProviderCache.cost``); ``evictions`` counts the positions this call is the first to show
    evicted, by the rule of their fate in it (``_evicted``): each position once per session and policy.
    """

    policy: str
    session_id: str
    position: int
    at: datetime | None
    gap_seconds: float | None
    input_tokens: int
    budget: int
    cached_tokens: int
    written_tokens: int
    cost: float
    prefix_break: bool
    cache_expired: bool
    over_budget: bool
    summary_call: bool
    summary_input_tokens: int
    summary_id: str | None
    evictions: dict[str, int]


class PolicyTotals(msgspec.Struct, kw_only=True):
    """Sums over every simulated call of one policy.

    ``effective_cost`` = Σ call cost + Σ summary-call input tokens (a summarizer call reads its span
    once, uncached); output tokens are the recorded ones under every policy and are left out.
    """

    policy: str
    sessions: int = 0
    calls: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    written_tokens: int = 0
    cache_hit_ratio: float = 0.0
    call_cost: float = 0.0
    summary_input_tokens: int = 0
    effective_cost: float = 0.0
    uncached_cost: float = 0.0
    """What the calls would cost with no prompt cache at all (every input token at 1x)."""
    prefix_breaks: int = 0
    expired_calls: int = 0
    untimed_calls: int = 0
    """Calls whose time was never recorded: whether the cache expired before them cannot be known
    (counted as no time elapsed), and cache-aware compaction cannot fire at them."""
    over_budget_calls: int = 0
    summary_calls: int = 0
    evictions: dict[str, int] = msgspec.field(default_factory=dict)

    def add(self, call: SimulatedCall) -> None:
        """Add one call's figures."""
        self.calls += 1
        self.input_tokens += call.input_tokens
        self.cached_tokens += call.cached_tokens
        self.written_tokens += call.written_tokens
        self.call_cost += call.cost
        self.summary_input_tokens += call.summary_input_tokens
        self.uncached_cost += call.input_tokens
        self.prefix_breaks += call.prefix_break
        self.expired_calls += call.cache_expired
        self.untimed_calls += call.at is None
        self.over_budget_calls += call.over_budget
        self.summary_calls += call.summary_call
        for rule, count in call.evictions.items():
            self.evictions[rule] = self.evictions.get(rule, 0) + count
        self.effective_cost = self.call_cost + self.summary_input_tokens
        self.cache_hit_ratio = self.cached_tokens / self.input_tokens if self.input_tokens else 0.0


class FactDifference(msgspec.Struct, frozen=True, kw_only=True):
    """A fact that leaves the context under some policies and never under others (same session)."""

    fact: str
    session_id: str
    left_under: tuple[str, ...]
    kept_under: tuple[str, ...]


class Simulation(msgspec.Struct, frozen=True, kw_only=True):
    """Everything ``simulate`` measured: per call, per policy totals, fact fates and differences."""

    provider: str
    ttl_seconds: float
    budget: int | None
    policies: tuple[str, ...]
    sessions: tuple[str, ...]
    calls: tuple[SimulatedCall, ...]
    totals: dict[str, PolicyTotals]
    facts: tuple[FactFate, ...] = ()
    fact_differences: tuple[FactDifference, ...] = ()


def _named(
    replayed: Iterator[ReplayedCall], session_id: str, label: str, calls: list[SimulatedCall]
) -> Iterator[ReplayedCall]:
    """The replay's calls; a render that cannot be made names its session, policy and place (same type).

    ``simulate --all`` stopped with ``PinnedOverBudgetError: pinned items need ...`` and no word of which
    of hundreds of sessions, or under which policy.
    """
    try:
        yield from replayed
    except ContextLedgerError as error:
        after = f"after position {calls[-1].position}" if calls else "at its first call"
        where = f"simulating session {session_id!r} under {label!r} ({after})"
        error.args = (f"{where}: {error.args[0] if error.args else error}", *error.args[1:])
        raise


def _simulate_session(  # noqa: PLR0917 - one replay has this many inputs
    source: Ledger,
    session_id: str,
    label: str,
    policy: Policy,
    cache: ProviderCache,
    scratch: Ledger,
    budget: int | None,
    make_summarizer: Callable[[TokenCounter], Summarizer] | None,
    tokenizer: str | TokenCounter,
    tracker: FactTracker,
) -> list[SimulatedCall]:
    times = {
        r.position: r.event.at
        for r in source.events(session_id)
        if isinstance(r.event, AssistantMessageAdded)
    }
    simulator = CacheSimulator(cache)
    digests = UnitMemo()
    seen: set[int] = set()  # positions some call showed evicted: each is counted once, at its first
    calls: list[SimulatedCall] = []
    replayed_calls = replay_calls(
        source,
        session_id,
        scratch,
        policy,
        budget=budget,
        make_summarizer=make_summarizer,
        tokenizer=tokenizer,
    )
    for replayed in _named(replayed_calls, session_id, label, calls):
        context = replayed.context
        at = times.get(replayed.position)
        priced = simulator.call(units_of(context, digests), at, stable=context.stable_prefix)
        evicted = _evicted(context)
        fresh: dict[str, int] = {}
        for position, rule in evicted.items():
            if position not in seen:
                seen.add(position)
                fresh[rule] = fresh.get(rule, 0) + 1
        tracker.see(context.position, context, evicted)
        request = replayed.requested
        calls.append(
            SimulatedCall(
                policy=label,
                session_id=session_id,
                position=context.position,
                at=at,
                gap_seconds=priced.gap_seconds,
                input_tokens=priced.input_tokens,
                budget=context.budget,
                cached_tokens=priced.cached_tokens,
                written_tokens=priced.written_tokens,
                cost=priced.cost,
                prefix_break=priced.prefix_break,
                cache_expired=priced.expired,
                over_budget=context.tokens > context.budget,
                summary_call=request is not None,
                summary_input_tokens=request.tokens_before if request is not None else 0,
                summary_id=context.summary_id,
                evictions=fresh,
            )
        )
    return calls


def simulate(
    source: Ledger,
    session_ids: Iterable[str],
    policies: Sequence[tuple[str, Policy]],
    *,
    cache: ProviderCache,
    new_scratch: Callable[[], AbstractContextManager[Ledger]],
    budget: int | None = None,
    make_summarizer: Callable[[TokenCounter], Summarizer] | None = None,
    tokenizer: str | TokenCounter = "cl100k_base",
    facts: Sequence[str] = (),
    on_replayed: Callable[[int, int], None] | None = None,
) -> Simulation:
    """Replay every model-call point of ``session_ids`` under each labelled policy; price it under ``cache``.

    No model is called: the summary worker runs alongside each replay with ``make_summarizer`` (the
    extractive one, offline), in a fresh scratch ledger per session and policy (``new_scratch``).
    A call's time is its assistant message's recorded ``at``, against which the cache TTL runs.

    Args:
        source: The ledger holding the recorded sessions (read only).
        session_ids: The sessions to replay.
        policies: ``(label, policy)`` pairs; labels name the policies in the result.
        cache: The provider cache model (``provider_cache("anthropic", "5m")``).
        new_scratch: Opens an empty ledger as a context manager (closed after each replay).
        budget: Overrides each policy's prompt budget.
        make_summarizer: Builds the summarizer from the replay's token counter; None: no summaries.
        tokenizer: The tokenizer name (or counter) renders are counted with.
        facts: Texts to follow: in which calls each is in the log but not in the context.
        on_replayed: Told ``(replays done, replays in all)`` after each session under each policy.

    Returns:
        Per-call rows (policy by policy, session by session), totals per policy and fact fates.

    Raises:
        ValidationError: If no policy is given, or a label twice.
        SessionNotFoundError: If a session is not in ``source``.
    """
    labels = [label for label, _ in policies]
    if not labels or len(set(labels)) != len(labels):
        raise ValidationError(f"give one or more policies, each once (got {labels})")
    sessions = tuple(session_ids)
    for session_id in sessions:
        source.version(session_id)  # SessionNotFoundError before any replay
    calls: list[SimulatedCall] = []
    totals: dict[str, PolicyTotals] = {}
    fates: list[FactFate] = []
    entered = {s: entered_at(source, s, facts) for s in sessions} if facts else {}
    counter = _shared_counter(source, tokenizer)
    for label, policy in policies:
        total = totals.setdefault(label, PolicyTotals(policy=label))
        for session_id in sessions:
            tracker = FactTracker(label, session_id, entered.get(session_id, {}), facts)
            with new_scratch() as scratch:
                rows = _simulate_session(
                    source,
                    session_id,
                    label,
                    policy,
                    cache,
                    scratch,
                    budget,
                    make_summarizer,
                    counter,
                    tracker,
                )
            total.sessions += 1
            for row in rows:
                total.add(row)
            calls.extend(rows)
            fates.extend(tracker.fates())
            if on_replayed is not None:
                on_replayed(sum(t.sessions for t in totals.values()), len(sessions) * len(policies))
    counter.flush()
    return Simulation(
        provider=cache.name,
        ttl_seconds=cache.ttl,
        budget=budget,
        policies=tuple(label for label, _ in policies),
        sessions=sessions,
        calls=tuple(calls),
        totals=totals,
        facts=tuple(fates),
        fact_differences=tuple(_differences(fates)),
    )


def _shared_counter(source: Ledger, tokenizer: str | TokenCounter) -> CachedTokenCounter:
    """One token cache for every replay: a text is counted once per simulation, not once per replay.

    Counts are keyed by content address and tokenizer, so they are the same in every ledger; they
    are looked up in the source ledger's token-count store, and the new ones kept back
    (``defer_saves``) and written to it once the simulation is done, as its renders would: one write
    per call would be one commit per call on a durable store. A ``CachedTokenCounter`` given is used
    as it is.
    """
    if isinstance(tokenizer, CachedTokenCounter):
        return tokenizer
    base = source.ports.tokenizers(tokenizer) if isinstance(tokenizer, str) else tokenizer
    counter = CachedTokenCounter(base, source.ports.token_counts, source.ports.blobs)
    counter.defer_saves = True
    return counter


def _differences(fates: Sequence[FactFate]) -> list[FactDifference]:
    """Return the facts that leave under some policies but under none of the others, per session."""
    grouped: dict[tuple[str, str], list[FactFate]] = {}
    for fate in fates:
        grouped.setdefault((fate.fact, fate.session_id), []).append(fate)
    out: list[FactDifference] = []
    for (fact, session_id), group in grouped.items():
        left = tuple(f.policy for f in group if f.left_calls)
        kept = tuple(f.policy for f in group if not f.left_calls and f.entered_at is not None)
        if left and kept:
            out.append(FactDifference(fact=fact, session_id=session_id, left_under=left, kept_under=kept))
    return out
