"""The model calls a why-trace searches: recorded ones (rendered again only when needed) or computed ones."""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from contextledger.application.audit.call_recorder import CallRecorder, CallView, context_sha
from contextledger.application.audit.text_trace import Sighting, sightings
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.kernel.wire_shapes import THINKING_BLOCKS
from contextledger.application.render.renderer import Renderer
from contextledger.domain.events import AssistantMessageAdded, DispositionRun
from contextledger.projections.context import RenderedContext
from contextledger.projections.dispositions import dispositions_of
from contextledger.projections.policy import Policy
from contextledger.projections.presets import get_preset
from contextledger.projections.reasoning_back import REASONING_WIRES, reasoning_rules_of, turn_replies

__all__ = [
    "TracedCall",
    "computed_calls",
    "in_signed_reasoning",
    "recorded_calls",
    "rendered",
    "run_at",
    "sightings_at",
    "summaries_caveat",
    "truncation_limits",
]

_WHOLE = {"verbatim", "pinned"}
_CUT = {"truncated", "stubbed"}


@dataclass(frozen=True)
class TracedCall:
    """A call: id, position, per-event fates, the summary applied, its context (or how to render it)."""

    call_id: str
    position: int
    runs: tuple[DispositionRun, ...]
    summary_id: str | None
    summary_shown: bool
    context: RenderedContext | None = None
    render: Callable[[], tuple[RenderedContext, bool]] | None = None
    """Renders a recorded call again; the flag says whether it no longer hashes as recorded."""
    driver: str | None = None
    """What made a recorded call (its record's ``meta["driver"]``: ``AgentContext``, ``cli``...)."""
    budget: int | None = None
    """The prompt budget the call was rendered under."""
    wire_format: str | None = None
    """The wire a recorded call's payload was built for: some send the turn's signed reasoning back."""
    reasoning_rules: int = 1
    """The ``REASONING_RULES`` its payload was built under (``reasoning_rules_of`` its record's meta)."""
    policy: str | None = None
    """The name of the policy the call was rendered under (a recorded call's own, not the latest's)."""
    card: bool = False
    """Whether the call's policy keeps a session-state card, which quotes messages (user words, decisions,
    the first line of a failed result) after they leave: their dispositions cannot tell then."""
    cut_by: tuple[str, ...] = ()
    """The truncation limits the call's policy sets (``max_lines``, ``max_tokens``): what cut a result."""


def run_at(runs: tuple[DispositionRun, ...], position: int) -> DispositionRun | None:
    """The run of a call's dispositions (sorted, disjoint) that holds ``position``, or None."""
    index = bisect.bisect_right([r.first for r in runs], position) - 1
    if index < 0 or runs[index].last < position:
        return None
    return runs[index]


def sightings_at(
    call: TracedCall,
    pattern: re.Pattern[str],
    sent: dict[int, bool],
    summary_holds: Callable[[str], bool],
    *,
    quotable: frozenset[int] = frozenset(),
    signed: frozenset[int] = frozenset(),
) -> tuple[tuple[Sighting, ...], bool]:
    """Where ``pattern`` shows in the call's payload, and whether a recorded call rendered differently.

    ``sent`` maps each carrying event's position to whether its text is in a part a payload sends
    (not reasoning); ``quotable`` holds the carriers a session-state card may quote once they leave
    the window (``would_quote``). A recorded call is rendered again only when its record cannot
    decide: no carrying event is shown whole, and one is cut (truncated, stubbed), or the call's
    policy keeps a card and a carrier is quotable (ADR 0082). Otherwise the record says it all: an
    event shown whole shows its text, and else only the summary rendered can hold it. ``signed`` holds the
    carriers whose text is in their signed reasoning only: a recorded call of a wire that sends it back
    (``REASONING_WIRES``) shows it when the event is in the call's current turn (``turn_replies``).
    """
    found, differs = _sightings(call, pattern, sent, summary_holds, quotable)
    back = [p for p in signed if p <= call.position]
    if not back or call.wire_format not in REASONING_WIRES:
        return found, differs
    context, differs = rendered(call)
    replies = set(turn_replies(context, call.reasoning_rules).values())
    return (*found, *(Sighting(shown="reasoning", sources=(p,)) for p in back if p in replies)), differs


def in_signed_reasoning(event: object, pattern: re.Pattern[str]) -> bool:
    """Whether ``pattern`` is in an assistant event's signed reasoning, the part a wire may send back."""
    if not isinstance(event, AssistantMessageAdded) or not event.reasoning:
        return False
    signed = event.reasoning_signature or event.meta.get(THINKING_BLOCKS)
    return bool(signed) and pattern.search(event.reasoning) is not None


def _sightings(
    call: TracedCall,
    pattern: re.Pattern[str],
    sent: dict[int, bool],
    summary_holds: Callable[[str], bool],
    quotable: frozenset[int],
) -> tuple[tuple[Sighting, ...], bool]:
    if call.context is not None:
        return sightings(call.context, pattern), False
    runs = {p: run_at(call.runs, p) for p in sent if p <= call.position}
    fates = {p: None if run is None else run.disposition for p, run in runs.items()}
    whole = [p for p, f in fates.items() if f in _WHOLE and sent[p]]
    quoted = call.card and any(p in quotable for p in fates)
    if whole or not (quoted or any(f in _CUT for f in fates.values())):
        found = [Sighting(shown=fates[p] or "verbatim", sources=(p,)) for p in whole]
        if call.summary_id and call.summary_shown:
            covered: dict[
                str, list[int]
            ] = {}  # by the summary standing for each (clip-archive shows several)
            for p, run in runs.items():
                if run is not None and run.disposition == "summarized":
                    covered.setdefault(run.summary_id or call.summary_id, []).append(p)
            found += [
                Sighting(shown="summary", sources=tuple(positions), summary_id=summary_id)
                for summary_id, positions in covered.items()
                if summary_holds(summary_id)
            ]
        return tuple(found), False
    context, differs = rendered(call)
    return sightings(context, pattern), differs


def rendered(call: TracedCall) -> tuple[RenderedContext, bool]:
    """The call's context (a recorded call rendered again) and whether it no longer renders as recorded."""
    if call.context is not None:
        return call.context, False
    assert call.render is not None  # noqa: S101 - recorded calls always carry their renderer
    return call.render()


def recorded_calls(recorder: CallRecorder, renderer: Renderer, views: list[CallView]) -> Iterator[TracedCall]:
    """The recorded calls, each able to render itself again under its registered policy, budget, tokenizer."""
    renderers = {renderer.counter.name: renderer}
    policies: dict[str, Policy] = {}

    def policy_of(view: CallView) -> Policy:
        record = view.record
        chosen = policies.get(record.policy_hash)
        if chosen is None:
            chosen = policies[record.policy_hash] = recorder.policy(record.session_id, record.policy_hash)
        return chosen

    def again(view: CallView) -> tuple[RenderedContext, bool]:
        record = view.record
        chosen = policy_of(view)
        using = renderers.get(record.tokenizer)
        if using is None:
            using = renderers[record.tokenizer] = Renderer(recorder.ledger, tokenizer=record.tokenizer)
        context = using.render(record.session_id, chosen, at=record.position, budget=record.budget)
        return context, context_sha(context) != record.context_sha

    for view in views:
        record = view.record
        chosen = policy_of(view)
        yield TracedCall(
            call_id=record.call_id,
            position=record.position,
            runs=record.dispositions,
            summary_id=record.summary_id,
            summary_shown=record.tiers.summary > 0,
            render=lambda view=view: again(view),  # type: ignore[misc]
            driver=record.meta.get("driver"),
            budget=record.budget,
            wire_format=record.wire_format,
            reasoning_rules=reasoning_rules_of(record.meta),
            policy=record.policy,
            card=chosen.card.enabled,
            cut_by=truncation_limits(chosen),
        )


def summaries_caveat(ledger: Ledger, session_id: str, policy: Policy | None) -> str | None:
    """What computed calls cannot show: summaries, when the session has none stored (``WhyAnswer.caveat``).

    ``why --policy`` said a text was dropped and advised a larger budget where ``report`` and ``simulate``
    (which run a summarizer as the session goes) showed it summarized at the same call.
    """
    chosen = policy or get_preset("default")
    if not chosen.summary.enabled or ledger.summaries(session_id):
        return None
    return (
        f"computed without summaries: the session has none stored, so none stands for what {chosen.name} "
        "drops (report and simulate run the extractive summarizer as they go; compact and worker store some)"
    )


def truncation_limits(policy: Policy) -> tuple[str, ...]:
    """The limits of ``policy``'s truncation that are set, as its keys name them."""
    config = policy.truncation
    return tuple(k for k, v in (("max_lines", config.max_lines), ("max_tokens", config.max_tokens)) if v)


def computed_calls(
    ledger: Ledger, session_id: str, entered: int, renderer: Renderer, *, policy: Policy, budget: int | None
) -> Iterator[TracedCall]:
    """The calls ``policy`` would have made since ``entered``: one render before each assistant message."""
    for recorded in ledger.events(session_id, after=entered):
        if not isinstance(recorded.event, AssistantMessageAdded):
            continue
        at = recorded.position - 1
        context = renderer.render(session_id, policy, at=at, budget=budget)
        yield TracedCall(
            call_id=f"computed@{at}",
            position=at,
            runs=dispositions_of(context),
            summary_id=context.summary_id,
            summary_shown=any(m.kind == "summary" for m in context.messages),
            context=context,
            budget=context.budget,
            policy=policy.name,
            cut_by=truncation_limits(policy),
        )
