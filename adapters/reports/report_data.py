"""The inspector's data: each call of a session as blocks, tiers, cache figures and fates, texts once."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime

import msgspec
from contextledger.adapters.reports.report_model import (
    CATEGORIES,
    Block,
    CallData,
    CallDiff,
    ReportData,
)
from contextledger.adapters.reports.session_parts import Texts, events_of, summaries_of
from contextledger.application.audit.call_recorder import (
    CallRecorder,
    context_sha,
    policy_hash,
)
from contextledger.application.audit.session_replay import replay_calls
from contextledger.application.audit.why_answer import reducer_of
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.kernel.summary_log import SummaryStream
from contextledger.application.render.renderer import Renderer
from contextledger.domain.events import AssistantMessageAdded, CompactionRequested, DispositionRun
from contextledger.domain.ports import TokenCounter
from contextledger.projections.cache_metrics import Unit, common_prefix, units_of
from contextledger.projections.call_text import argument_text
from contextledger.projections.context import RenderedContext, RenderedMessage
from contextledger.projections.dispositions import dispositions_of
from contextledger.projections.policy import Policy
from contextledger.projections.provider_cache import CacheCall, CacheSimulator, ProviderCache
from contextledger.projections.summary_requests import Summarizer

__all__ = ["build_report"]

_CATEGORY_OF_KIND = {
    "summary": "summary",
    "stub": "stub",
    "truncated": "truncated",
    "injection": "injected",
    "card": "state",
}
"""Tiers of the blocks that are not history; the session-state card is session state, beside the pins."""
_GONE = frozenset({"stubbed", "summarized", "dropped", "truncated"})


def _message_text(message: RenderedMessage) -> str:
    calls = "".join(f"\n→ {c.name}({c.arguments})" for c in message.tool_calls)
    return message.text + calls if message.text else calls.lstrip("\n")


def _search_text(message: RenderedMessage, shown: str) -> str | None:
    """The block's text with its calls' argument values unescaped, when escaping changed them (else None)."""
    values = [text for c in message.tool_calls if (text := argument_text(c.arguments))]
    return shown + "\n" + "\n".join(values) if values else None


def _fate(runs: Sequence[DispositionRun], starts: Sequence[int], position: int) -> DispositionRun | None:
    index = bisect.bisect_right(starts, position) - 1
    return runs[index] if index >= 0 and runs[index].last >= position else None


def _category(message: RenderedMessage, pinned: set[int]) -> str:
    category = _CATEGORY_OF_KIND.get(message.kind)
    if category is not None:
        return category
    return "state" if message.sources and set(message.sources) <= pinned else "history"


def _cache_status(start: int, end: int, priced: CacheCall) -> str:
    if end <= priced.cached_tokens:
        return "read"
    if start < priced.cached_tokens + priced.written_tokens:
        return "written"
    return ""


def _blocks(
    context: RenderedContext, runs: Sequence[DispositionRun], priced: CacheCall, texts: Texts
) -> tuple[list[Block], dict[str, int]]:
    pinned = {p for r in runs if r.disposition == "pinned" for p in range(r.first, r.last + 1)}
    tiers = dict.fromkeys(CATEGORIES, 0)
    head = context.system_tokens + context.tools_tokens
    tool_names = ", ".join(tool.name for tool in context.tools)
    blocks = [
        Block("system", "system", texts.id(context.system), context.system_tokens, 1, 1, "system", "", ""),
        Block("tools", "tools", texts.id(tool_names), context.tools_tokens, 1, 1, "tools", "", ""),
    ]
    status = _cache_status(0, head, priced)
    blocks = [msgspec.structs.replace(b, cache=status) for b in blocks]
    tiers["system"], tiers["tools"] = context.system_tokens, context.tools_tokens
    offset = head
    starts = [r.first for r in runs]
    for message in context.messages:
        category = _category(message, pinned)
        first = min(message.sources, default=0)
        last = max(message.sources, default=0)
        run = _fate(runs, starts, first) if first else None
        rule = run.rule if run is not None else message.kind
        if category == "summary":
            rule = "summary"
        elif run is not None and run.disposition in {"verbatim", "pinned"}:
            rule = run.disposition  # kept: the rule of the range around it does not apply to it
        shown = _message_text(message)
        search = _search_text(message, shown)
        blocks.append(
            Block(
                category,
                message.role,
                texts.id(shown),
                message.tokens,
                first,
                last,
                rule,
                reducer_of(rule) if rule not in {"verbatim", "pinned"} else "",
                _cache_status(offset, offset + message.tokens, priced),
                texts.id(search) if search is not None else -1,
            )
        )
        tiers[category] += message.tokens
        offset += message.tokens
    return blocks, tiers


def _positions(runs: Sequence[DispositionRun], kinds: frozenset[str]) -> dict[int, str]:
    return {p: r.disposition for r in runs if r.disposition in kinds for p in range(r.first, r.last + 1)}


def _diff(
    previous: tuple[CallData, Sequence[Unit]] | None, call: CallData, units: Sequence[Unit]
) -> CallDiff | None:
    if previous is None:
        return None
    before, before_units = previous
    common, _ = common_prefix(before_units, units)
    first = next(
        (i for i, (a, b) in enumerate(zip(before_units, units, strict=False)) if a.key != b.key),
        min(len(before_units), len(units)),
    )
    old_keys = {u.key for u in before_units}
    new_keys = {u.key for u in units}
    # Unit 0 is the system prompt and tools together: blocks 0 and 1 of the page.
    added = tuple(i + 1 for i, u in enumerate(units) if i and u.key not in old_keys)
    removed = tuple(i + 1 for i, u in enumerate(before_units) if i and u.key not in new_keys)
    was = _positions(before.runs, _GONE)
    now = _positions(call.runs, _GONE)
    changed: dict[str, list[int]] = {"stubbed": [], "summarized": [], "dropped": [], "truncated": []}
    for position, fate in sorted(now.items()):
        if was.get(position) != fate and position <= before.position:
            changed[fate].append(position)
    return CallDiff(
        common_tokens=common,
        first_different=-1 if first == len(units) == len(before_units) else (first + 1 if first else 0),
        added=added,
        removed=removed,
        stubbed=tuple(changed["stubbed"]),
        summarized=tuple(changed["summarized"]),
        dropped=tuple(changed["dropped"]),
        truncated=tuple(changed["truncated"]),
        cost_delta=round(call.cost - before.cost, 2),
    )


class _Call(msgspec.Struct, frozen=True, kw_only=True):
    """One call to lay out: its context and what is known of it beyond the render."""

    call_id: str
    position: int
    at: datetime | None
    policy: Policy
    window: int
    context: RenderedContext
    runs: tuple[DispositionRun, ...]
    compaction: bool = False
    usage: dict[str, int | float | str | None] | None = None
    replay_matches: bool | None = None
    failure: str | None = None


def _lay_out(calls: Sequence[_Call], cache: ProviderCache, texts: Texts) -> list[CallData]:
    simulator = CacheSimulator(cache)
    out: list[CallData] = []
    previous: tuple[CallData, Sequence[Unit]] | None = None
    summary_before: str | None = None
    for number, call in enumerate(calls, start=1):
        context = call.context
        units = units_of(context)
        priced = simulator.call(units, call.at, stable=context.stable_prefix)
        blocks, tiers = _blocks(context, call.runs, priced, texts)
        data = CallData(
            number=number,
            call_id=call.call_id,
            position=call.position,
            at=call.at.isoformat() if call.at is not None else "",
            policy=call.policy.name,
            policy_hash=policy_hash(call.policy),
            budget=context.budget,
            window=max(call.window, context.budget),
            tokens=context.tokens,
            tiers=tiers,
            cached=priced.cached_tokens,
            written=priced.written_tokens,
            cost=round(priced.cost, 2),
            uncached_cost=priced.input_tokens,
            prefix_break=priced.prefix_break,
            cache_expired=priced.expired,
            compaction=call.compaction,
            summary_applied=context.summary_id is not None and context.summary_id != summary_before,
            summary_id=context.summary_id,
            blocks=tuple(blocks),
            runs=call.runs,
            diff=None,
            usage=call.usage,
            replay_matches=call.replay_matches,
            failure=call.failure,
        )
        data = msgspec.structs.replace(data, diff=_diff(previous, data, units))
        out.append(data)
        previous = (data, units)
        summary_before = context.summary_id
    return out


def _window(policy: Policy, budget: int | None) -> int:
    limits = policy.budget.build()
    return (limits.with_prompt_limit(budget) if budget is not None else limits).total


def _planned(ledger: Ledger, session_id: str) -> list[int]:
    """The positions at which compactions were planned for the session (its summary stream), sorted."""
    stream = SummaryStream(ledger.log, session_id)
    return sorted(r.event.planned_at for r in stream.events() if isinstance(r.event, CompactionRequested))


def _recorded(ledger: Ledger, session_id: str) -> list[_Call]:
    recorder = CallRecorder(ledger)
    renderers: dict[str, Renderer] = {}
    calls: list[_Call] = []
    planned = _planned(ledger, session_id)
    before = 0
    for view in recorder.calls(session_id):
        record = view.record
        renderer = renderers.get(record.tokenizer)
        if renderer is None:
            renderer = renderers[record.tokenizer] = Renderer(ledger, tokenizer=record.tokenizer)
        policy = recorder.policy(session_id, record.policy_hash)
        context = renderer.render(session_id, policy, at=record.position, budget=record.budget)
        usage = view.usage
        # a compaction planned since the previous call, up to this one's position: planned for this call
        lo, hi = bisect.bisect_right(planned, before), bisect.bisect_right(planned, record.position)
        before = max(before, record.position)
        calls.append(
            _Call(
                call_id=record.call_id,
                position=record.position,
                at=record.at,
                policy=policy,
                window=_window(policy, record.budget),
                context=context,
                runs=record.dispositions,
                compaction=hi > lo,
                failure=view.failure.error if view.failure is not None else None,
                usage=None
                if usage is None
                else {
                    "input_tokens": usage.input_tokens,
                    "cached_tokens": usage.cached_tokens,
                    "cache_write_tokens": usage.cache_write_tokens,
                    "output_tokens": usage.output_tokens,
                    "latency_ms": usage.latency_ms,
                    "model": usage.model,
                },
                replay_matches=context_sha(context) == record.context_sha,
            )
        )
    return calls


def _computed(  # noqa: PLR0917 - one replay has this many inputs
    ledger: Ledger,
    scratch: Ledger,
    session_id: str,
    policy: Policy,
    budget: int | None,
    make_summarizer: Callable[[TokenCounter], Summarizer] | None,
    tokenizer: str,
) -> list[_Call]:
    times = {
        r.position: r.event.at
        for r in ledger.events(session_id)
        if isinstance(r.event, AssistantMessageAdded)
    }
    window = _window(policy, budget)
    return [
        _Call(
            call_id=f"before-{replayed.position}",
            position=replayed.context.position,
            at=times.get(replayed.position),
            policy=policy,
            window=window,
            context=replayed.context,
            runs=dispositions_of(replayed.context),
            compaction=replayed.requested is not None,
        )
        for replayed in replay_calls(
            ledger,
            session_id,
            scratch,
            policy,
            budget=budget,
            make_summarizer=make_summarizer,
            tokenizer=tokenizer,
        )
    ]


def build_report(
    ledger: Ledger,
    session_id: str,
    *,
    policy: tuple[str, Policy],
    cache: ProviderCache,
    new_scratch: Callable[[], AbstractContextManager[Ledger]],
    now: datetime,
    budget: int | None = None,
    compare: tuple[str, Policy] | None = None,
    make_summarizer: Callable[[TokenCounter], Summarizer] | None = None,
    tokenizer: str = "cl100k_base",
) -> ReportData:
    """Assemble the inspector's data for one session.

    The session's recorded ``model_calls`` are used when it has some (each rendered again from the
    log to list its blocks); otherwise the calls ``policy`` would have made are computed, one before
    each assistant message, with the summary worker alongside (``make_summarizer``) in a scratch
    ledger. ``compare`` adds the calls a second policy would have made. Prompt-cache figures come
    from ``cache`` against the calls' recorded times.

    Raises:
        SessionNotFoundError: The session does not exist.
    """
    ledger.version(session_id)
    texts = Texts()
    events = events_of(ledger, session_id, texts)
    recorded = _recorded(ledger, session_id)
    if recorded:
        calls = _lay_out(recorded, cache, texts)
        summaries = summaries_of(ledger, session_id, calls, texts)
        source = "recorded"
    else:
        with new_scratch() as scratch:
            computed = _computed(ledger, scratch, session_id, policy[1], budget, make_summarizer, tokenizer)
            calls = _lay_out(computed, cache, texts)
            summaries = summaries_of(scratch, session_id, calls, texts)
        source = "computed"
    compared: list[CallData] | None = None
    if compare is not None:
        # beside recorded calls, the other policy runs under the budget they were recorded with (unless given)
        side = budget if budget is not None or not recorded else recorded[-1].context.budget
        with new_scratch() as scratch:
            other = _computed(ledger, scratch, session_id, compare[1], side, make_summarizer, tokenizer)
            compared = _lay_out(other, cache, texts)
    return ReportData(
        session_id=session_id,
        source=source,
        policy=calls[-1].policy if source == "recorded" and calls else policy[0],
        provider=cache.name,
        ttl_seconds=cache.ttl,
        tokenizer=tokenizer if source == "computed" or not recorded else recorded[-1].context.tokenizer,
        generated_at=now.isoformat(),
        texts=texts.texts,
        events=events,
        calls=calls,
        summaries=summaries,
        compare_policy=compare[0] if compare is not None else None,
        compare=compared,
    )
