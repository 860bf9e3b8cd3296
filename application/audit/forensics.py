"""The why-trace: where a fact entered the log, in which model call it left the context, by which rule."""

from __future__ import annotations

import bisect
import re

import msgspec
from contextledger.application.audit.call_recorder import CallRecorder
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.kernel.summary_log import SummaryStream
from contextledger.application.render.renderer import Renderer
from contextledger.application.search.log_search import searchable_texts
from contextledger.application.search.text_index import TextIndex
from contextledger.domain.errors import ValidationError
from contextledger.domain.events import (
    AssistantMessageAdded,
    DispositionRun,
    ItemPinned,
    ToolResultRecorded,
    UserMessageAdded,
)
from contextledger.projections.dispositions import dispositions_of
from contextledger.projections.policy import Policy

__all__ = ["CallFate", "WhyAnswer", "why"]

_KEPT = {"verbatim", "pinned", "control"}
_REDUCERS = (
    ("retention", "tool-result retention"),
    ("truncation", "truncation"),
    ("summary", "summary"),
    ("window", "sliding window"),
    ("low-water", "guarantee (compaction down to the low-water mark)"),
    ("guarantee", "guarantee (hard budget)"),
)


class CallFate(msgspec.Struct, frozen=True, kw_only=True):
    """The fact's fate in one model call."""

    call_id: str
    position: int
    disposition: str
    rule: str
    summary_id: str | None = None


class WhyAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """Why a fact is (or is not) in the context, call by call, with a verdict and the smallest fix."""

    session_id: str
    query: str
    verdict: str
    entered_at: int | None
    entered_kind: str | None = None
    snippet: str | None = None
    calls_source: str = "recorded"
    """``recorded`` audit records, or ``computed``: the calls the policy would have made."""
    calls: tuple[CallFate, ...] = ()
    first_left_call: str | None = None
    first_left_position: int | None = None
    disposition: str | None = None
    rule: str | None = None
    reducer: str | None = None
    policy: str | None = None
    summary_id: str | None = None
    summary_contains: str | None = None
    """``exact``, ``normalized`` (same words, other case or spacing) or ``no``."""
    smallest_change: str | None = None


def _normalized(text: str) -> str:
    return " ".join(text.casefold().split())


def _fate(runs: tuple[DispositionRun, ...], position: int) -> DispositionRun | None:
    index = bisect.bisect_right([r.first for r in runs], position) - 1
    if index < 0 or runs[index].last < position:
        return None
    return runs[index]


def _reducer(rule: str) -> str:
    for prefix, name in _REDUCERS:
        if rule.startswith(prefix):
            return name
    return rule


class _Entry(msgspec.Struct, frozen=True):
    position: int
    kind: str
    snippet: str
    text: str
    tool_name: str | None


def _entered(
    ledger: Ledger,
    session_id: str,
    query: str,
    pattern: re.Pattern[str],
    position: int | None,
    *,
    regex: bool,
) -> _Entry | None:
    events = (
        ledger.events(session_id, after=position - 1, upto=position)
        if position is not None
        else TextIndex(ledger).scan(session_id, query, regex=regex)
    )
    for recorded in events:
        for text, tool in searchable_texts(ledger, recorded.event):
            match = pattern.search(text)
            if match or position is not None:
                start, end = match.span() if match else (0, min(len(text), 80))
                snippet = " ".join(text[max(0, start - 60) : end + 60].split())
                return _Entry(recorded.position, type(recorded.event).__name__, snippet, text, tool)
    return None


def why(
    ledger: Ledger,
    session_id: str,
    query: str,
    *,
    renderer: Renderer,
    regex: bool = False,
    position: int | None = None,
    policy: Policy | None = None,
    budget: int | None = None,
) -> WhyAnswer:
    """Trace ``query`` (text, a regular expression, or the event at ``position``) through the model calls.

    Recorded ``model_calls`` are used when the session has them; otherwise the calls ``policy`` and
    ``budget`` would have made (one render before each assistant message) are computed, not stored.
    """
    try:
        pattern = re.compile(query if regex else re.escape(query), re.IGNORECASE)
    except re.error as error:
        raise ValidationError(f"not a regular expression: {query!r} ({error})") from None
    entry = _entered(ledger, session_id, query, pattern, position, regex=regex)
    if entry is None:
        return WhyAnswer(
            session_id=session_id,
            query=query,
            verdict="not in the log: the session never held it",
            entered_at=None,
        )
    fates, source, policy_name = _fates(
        ledger, session_id, entry.position, renderer=renderer, policy=policy, budget=budget
    )
    answer = WhyAnswer(
        session_id=session_id,
        query=query,
        verdict="",
        entered_at=entry.position,
        entered_kind=entry.kind,
        snippet=entry.snippet,
        calls_source=source,
        calls=tuple(fates),
        policy=policy_name,
    )
    left = next((f for f in fates if f.disposition not in _KEPT), None)
    if left is None:
        where = f"in all {len(fates)} calls since" if fates else "no model call has been made since"
        return msgspec.structs.replace(
            answer, verdict=f"still in context: {where} (entered at position {entry.position})"
        )
    summary_id = left.summary_id or next((f.summary_id for f in fates if f.summary_id), None)
    contains = _summary_contains(ledger, session_id, summary_id, pattern) if summary_id else None
    reducer = _reducer(left.rule)
    verdict = f"{left.disposition} by {reducer} — rule {left.rule} — at call {left.call_id}"
    verdict += f" (position {left.position})"
    if summary_id:
        mentions = "mentions" if contains in {"exact", "normalized"} else "does not mention"
        verdict += f"; summary {summary_id} {mentions} it"
    return msgspec.structs.replace(
        answer,
        verdict=verdict,
        first_left_call=left.call_id,
        first_left_position=left.position,
        disposition=left.disposition,
        rule=left.rule,
        reducer=reducer,
        summary_id=summary_id,
        summary_contains=contains,
        smallest_change=_smallest_change(ledger, session_id, entry, left),
    )


def _fates(
    ledger: Ledger,
    session_id: str,
    entered: int,
    *,
    renderer: Renderer,
    policy: Policy | None,
    budget: int | None,
) -> tuple[list[CallFate], str, str | None]:
    recorder = CallRecorder(ledger)
    views = [v for v in recorder.calls(session_id) if v.record.position >= entered]
    if views and policy is None:
        fates = []
        for view in views:
            run = _fate(view.record.dispositions, entered)
            if run is not None:
                fates.append(
                    CallFate(
                        call_id=view.record.call_id,
                        position=view.record.position,
                        disposition=run.disposition,
                        rule=run.rule,
                        summary_id=view.record.summary_id,
                    )
                )
        return fates, "recorded", views[-1].record.policy
    chosen = policy or Policy()
    fates = []
    for recorded in ledger.events(session_id, after=entered):
        if not isinstance(recorded.event, AssistantMessageAdded):
            continue
        at = recorded.position - 1
        context = renderer.render(session_id, chosen, at=at, budget=budget)
        run = _fate(dispositions_of(context), entered)
        if run is not None:
            fates.append(
                CallFate(
                    call_id=f"computed@{at}",
                    position=at,
                    disposition=run.disposition,
                    rule=run.rule,
                    summary_id=context.summary_id,
                )
            )
    return fates, "computed", chosen.name


def _summary_contains(ledger: Ledger, session_id: str, summary_id: str, pattern: re.Pattern[str]) -> str:
    for artifact in SummaryStream(ledger.log, session_id).artifacts():
        if artifact.summary_id == summary_id:
            text = ledger.text(artifact.content)
            if pattern.search(text):
                return "exact"
            needle = _normalized(pattern.pattern.replace("\\", ""))
            return "normalized" if needle and needle in _normalized(text) else "no"
    return "no"


def _smallest_change(ledger: Ledger, session_id: str, entry: _Entry, left: CallFate) -> str:
    """The least config change (or action) that would have kept the event verbatim at that call."""
    later = ledger.events(session_id, after=entry.position, upto=left.position)
    turns = 1 + sum(isinstance(r.event, UserMessageAdded) for r in later)
    steps = 1 + sum(isinstance(r.event, AssistantMessageAdded) for r in later)
    pin = f"or pin it: contextledger pin {session_id} {entry.position}"
    if left.rule.startswith("retention"):
        tool = entry.tool_name or "default"
        same_tool = sum(
            isinstance(r.event, ToolResultRecorded) and r.event.tool_name == entry.tool_name for r in later
        )
        if "last" in left.rule:
            return f"[retention.tools.{tool}] keep_last = {same_tool + 1} {pin}"
        unit = "keep_turns" if "turn" in left.rule else "keep_steps"
        return f"[retention.tools.{tool}] {unit} = {turns if unit == 'keep_turns' else steps} {pin}"
    if left.rule.startswith("truncation"):
        return f"[truncation] max_tokens above this output's size (it was cut), {pin}"
    if left.disposition == "summarized":
        return f"keep it out of summaries: {pin}"
    pinned = any(isinstance(r.event, ItemPinned) and r.event.position == entry.position for r in later)
    return "raise [budget] total (it was dropped to fit)" + ("" if pinned else f", {pin}")
