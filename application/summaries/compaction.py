"""Planning compactions: when the free reducers had to drop history, request a prefix-ward summary of it."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from contextledger.application.kernel.ledger import Ledger
from contextledger.application.kernel.summary_log import SummaryStream
from contextledger.application.render.renderer import Renderer
from contextledger.application.summaries.clip_archive import plan_batch
from contextledger.domain.content import content_address
from contextledger.domain.events import (
    CompactionRequested,
    CompactionTrigger,
    ContextOverflowReported,
    SummaryRecorded,
)
from contextledger.projections.budget import Budget
from contextledger.projections.context import RenderedContext
from contextledger.projections.policy import Policy
from contextledger.projections.presets import get_preset

__all__ = ["CompactionPlan", "Compactor", "plan_span", "policy_key"]

FIRST_COVERED = 2
"""Position 1 is the session's start (system prompt and tools), never summarized."""

OVERFLOW_TIGHTENING = 0.5
"""After a reported overflow the verbatim tail is cut to this fraction of the low-water mark."""

_LOSSY = {"dropped"}

AHEAD = 0.75
"""Policies applying summaries at compaction points plan the next span this far from low to high mark."""


def _newest_in_chain(
    applied: SummaryRecorded | None, artifacts: list[SummaryRecorded]
) -> SummaryRecorded | None:
    """Follow the chain from the summary shown to the newest artifact built on it (maybe not shown yet)."""
    current = applied
    for _ in artifacts:
        parent = current.summary_id if current is not None else None
        children = [a for a in artifacts if a.previous_summary_id == parent and a is not current]
        if current is not None:
            children = [a for a in children if a.covers_through > current.covers_through]
        if not children:
            break
        current = max(children, key=lambda a: a.covers_through)
    return current


@dataclass(frozen=True)
class CompactionPlan:
    """The span to summarize and what the summary integrates."""

    covers_from: int
    covers_through: int
    round: int
    previous_summary_id: str | None
    tokens_before: int
    target_tokens: int
    depth: int = 0


def policy_key(policy: Policy) -> str:
    """Return ``name@hash`` of a policy: readable, and different whenever its content differs."""
    return f"{policy.name}@{content_address(policy.fingerprint())[:12]}"


def _cut_for_target(context: RenderedContext, floor: int, target: int) -> int | None:
    """Return the last position to summarize so the verbatim history left is within ``target`` tokens.

    Cuts only between step groups (never after an assistant message whose tool results follow), never
    inside the stable prefix, and always leaves the latest step verbatim; pinned messages inside the
    span (the task, the latest request) stay shown whatever the summary covers.
    """
    history = [m for m in context.messages[context.stable_prefix :] if m.kind != "injection"]
    fixed = context.tokens - sum(m.tokens for m in history)
    last_step = max((i for i, m in enumerate(history) if m.role != "tool"), default=0)
    cut: int | None = None
    remaining = sum(m.tokens for m in history)
    for index, message in enumerate(history[:last_step]):
        remaining -= message.tokens
        following = history[index + 1] if index + 1 < len(history) else None
        if following is not None and following.role == "tool":
            continue  # a call and its results stay together
        if message.sources and max(message.sources) >= floor:
            cut = max(message.sources)
        if fixed + remaining <= target:
            break
    return cut


def plan_span(
    context: RenderedContext,
    budget: Budget,
    applied: SummaryRecorded | None,
    *,
    trigger: CompactionTrigger = "threshold",
    ahead: float | None = None,
    summary_tokens: int = 0,
) -> CompactionPlan | None:
    """Return the prefix-ward span to summarize next, or None when nothing calls for it.

    With ``ahead`` (a fraction of the way from the low- to the high-water mark), a context past that
    level gets its next compaction's span requested before the compaction point, so that a policy
    applying summaries at compaction points (``on_arrival = false``) swaps the summary in with the
    drop: one prefix change per compaction instead of two.

    ``threshold``: the free reducers dropped whole groups past the applied summary: summarize
    through the last dropped position (the hysteresis already chose a chunk that brings the context
    down to the low-water mark). ``manual`` and ``overflow``: cut the verbatim history down to the
    low-water mark (overflow: to half of it), whatever was dropped.
    """
    covered = applied.covers_through if applied is not None else FIRST_COVERED - 1
    covers_from = applied.covers_from if applied is not None else FIRST_COVERED
    dropped = [d.last for d in context.decisions if d.action in _LOSSY and d.last > covered]
    through = max(dropped, default=covered)
    target = budget.low_mark
    if trigger != "threshold":
        if trigger == "overflow":
            target = math.floor(target * OVERFLOW_TIGHTENING)
        cut = _cut_for_target(context, covered + 1, target)
        through = max(through, cut or covered)
    elif through <= covered and ahead is not None:
        level = budget.low_mark + ahead * (budget.high_mark - budget.low_mark)
        if context.tokens >= level:
            cut = _cut_for_target(context, covered + 1, max(0, target - summary_tokens))
            through = max(through, cut or covered)
    if through <= covered:
        return None
    return CompactionPlan(
        covers_from=covers_from,
        covers_through=through,
        round=(applied.round + 1) if applied is not None else 1,
        previous_summary_id=applied.summary_id if applied is not None else None,
        tokens_before=context.tokens,
        target_tokens=target,
    )


class Compactor:
    """Plans compactions of a session under a policy and records them as durable requests.

    A render never waits for a summary: planning renders with the deterministic fallback, records a
    ``CompactionRequested`` in the session's summary stream and returns. Workers produce the artifact.

    Args:
        ledger: The ledger.
        renderer: Renders the context the plan is based on (the same one the agent uses).
        summarizer: Name of the summarizer kind that will serve the requests.
        summarizer_config: Its configuration hash (artifacts are keyed by it).
    """

    def __init__(
        self,
        ledger: Ledger,
        renderer: Renderer,
        *,
        summarizer: str = "extractive",
        summarizer_config: str = "",
        ahead: float | None = None,
        summary_tokens: int = 800,
    ) -> None:
        self.ahead = ahead
        self.summary_tokens = summary_tokens
        self.ledger = ledger
        self.renderer = renderer
        self.summarizer = summarizer
        self.summarizer_config = summarizer_config

    def plan(
        self,
        session_id: str,
        policy: Policy | str = "default",
        *,
        budget: int | None = None,
        trigger: CompactionTrigger = "threshold",
    ) -> CompactionRequested | None:
        """Record a compaction request when the session needs one now; return it (or None).

        At most one request per (span, summary in force, policy, summarizer) is ever stored: a planner
        in another process that sees the same state appends nothing new (idempotency key).
        """
        chosen = get_preset(policy) if isinstance(policy, str) else policy
        if not chosen.summary.enabled:
            return None
        stream = SummaryStream(self.ledger.log, session_id)
        now = self.ledger.clock.now()
        if any(s.status(now) in {"open", "running", "waiting"} for s in stream.requests().values()):
            return None  # one unfinished request at a time: the next plan integrates its result
        context = self.renderer.render(session_id, chosen, budget=budget)
        artifacts = {a.summary_id: a for a in stream.artifacts()}
        applied = artifacts.get(context.summary_id or "")
        mine = [  # a withheld summary is never a basis: the next one reads the span itself
            a
            for a in artifacts.values()
            if (a.config_sha == self.summarizer_config or a is applied) and not a.withheld
        ]
        basis = _newest_in_chain(applied, mine)
        limits = self.renderer.projector(chosen, budget=budget).budget
        if chosen.summary.mode == "clip":
            return self._plan_batch(
                session_id,
                chosen,
                budget=budget,
                context=context,
                batches=mine,
                limits=limits,
                trigger=trigger,
            )
        ahead = self.ahead if self.ahead is not None else (None if chosen.summary.on_arrival else AHEAD)
        if basis is not applied:
            ahead = None  # the next summary is made and waits for the compaction point: nothing to plan ahead
        plan = plan_span(
            context, limits, basis, trigger=trigger, ahead=ahead, summary_tokens=self.summary_tokens
        )
        if plan is None or self._reusable(plan, artifacts.values(), trigger):
            return None
        return self._request(
            session_id, chosen, plan, budget=budget, context=context, limits=limits, trigger=trigger
        )

    def _plan_batch(
        self,
        session_id: str,
        policy: Policy,
        *,
        budget: int | None,
        context: RenderedContext,
        batches: list[SummaryRecorded],
        limits: Budget,
        trigger: CompactionTrigger,
    ) -> CompactionRequested | None:
        """Clip-archive: a fresh batch of what was dropped, or the middle batches one level deeper."""
        dropped = max((d.last for d in context.decisions if d.action in _LOSSY), default=1)
        if trigger != "threshold":
            dropped = max(dropped, _cut_for_target(context, 2, limits.low_mark) or 1)
        batch = plan_batch(
            batches, dropped, clip_first=policy.summary.clip_first, clip_last=policy.summary.clip_last
        )
        if batch is None:
            return None
        plan = CompactionPlan(
            covers_from=batch.covers_from,
            covers_through=batch.covers_through,
            round=batch.batches + 1,
            previous_summary_id=None,
            tokens_before=context.tokens,
            target_tokens=limits.low_mark,
            depth=batch.depth,
        )
        if self._reusable(plan, batches, trigger):
            return None
        return self._request(
            session_id, policy, plan, budget=budget, context=context, limits=limits, trigger=trigger
        )

    def _request(
        self,
        session_id: str,
        chosen: Policy,
        plan: CompactionPlan,
        *,
        budget: int | None,
        context: RenderedContext,
        limits: Budget,
        trigger: CompactionTrigger,
    ) -> CompactionRequested:
        now = self.ledger.clock.now()
        stream = SummaryStream(self.ledger.log, session_id)
        key = policy_key(chosen)
        identity = (
            f"{session_id}|{plan.covers_from}|{plan.covers_through}|{plan.previous_summary_id}|{key}|{budget}"
            f"|{plan.depth}"
        )
        withheld = self._withheld(plan, stream.artifacts()) if trigger == "manual" else 0
        if withheld:  # asked for by hand again after a withheld summary: a new request, not the old one
            identity += f"|after {withheld} withheld"
        request_id = "cr-" + content_address(identity + "|" + self.summarizer_config)[:24]
        event = CompactionRequested(
            request_id=request_id,
            session_id=session_id,
            covers_from=plan.covers_from,
            covers_through=plan.covers_through,
            planned_at=context.position,
            trigger=trigger,
            round=plan.round,
            depth=plan.depth,
            previous_summary_id=plan.previous_summary_id,
            policy=key,
            policy_json=chosen.fingerprint(),
            budget=limits.prompt_limit if budget is None else budget,
            tokenizer=context.tokenizer,
            tokens_before=plan.tokens_before,
            target_tokens=plan.target_tokens,
            summarizer=self.summarizer,
            summarizer_config=self.summarizer_config,
            at=now,
        )
        stream.append(event, idempotency_key=f"request:{request_id}")
        return event

    def _same(self, plan: CompactionPlan, artifact: SummaryRecorded) -> bool:
        """Whether ``artifact`` is of this plan's span, parent and depth, by this summarizer config."""
        return (
            artifact.covers_from == plan.covers_from
            and artifact.covers_through == plan.covers_through
            and artifact.previous_summary_id == plan.previous_summary_id
            and artifact.depth == plan.depth
            and artifact.config_sha == self.summarizer_config
        )

    def _reusable(
        self, plan: CompactionPlan, artifacts: Iterable[SummaryRecorded], trigger: CompactionTrigger
    ) -> bool:
        """An artifact of this span, parent and summarizer config exists (e.g. made under another policy).

        A withheld one counts for the planner's own triggers (a summarizer that keeps losing the task is
        not asked again and again), not for a compaction asked for by hand: that asks again.
        """
        return any(self._same(plan, a) and not (a.withheld and trigger == "manual") for a in artifacts)

    def _withheld(self, plan: CompactionPlan, artifacts: Iterable[SummaryRecorded]) -> int:
        """How many withheld artifacts of this plan's span, parent and summarizer config exist."""
        return sum(self._same(plan, a) and a.withheld for a in artifacts)

    def report_overflow(
        self,
        session_id: str,
        policy: Policy | str = "default",
        *,
        budget: int | None = None,
        limit_tokens: int | None = None,
        sent_tokens: int | None = None,
        message: str = "",
    ) -> CompactionRequested | None:
        """Record that the provider refused the context as too long, and force a tighter compaction.

        Raises:
            ConfigError: an unknown policy or a bad budget; nothing is written.
        """
        chosen = get_preset(policy) if isinstance(policy, str) else policy
        self.renderer.projector(chosen, budget=budget)  # refuses a bad budget before the report is stored
        stream = SummaryStream(self.ledger.log, session_id)
        stream.append(
            ContextOverflowReported(
                position=self.ledger.version(session_id),
                limit_tokens=limit_tokens,
                sent_tokens=sent_tokens,
                message=message,
                at=self.ledger.clock.now(),
            )
        )
        return self.plan(session_id, chosen, budget=budget, trigger="overflow")
