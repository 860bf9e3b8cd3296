"""The why-trace: which events carry a text, in which model call it left the context, by which rule."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import msgspec
from contextledger.application.audit.call_recorder import CallRecorder
from contextledger.application.audit.carriers import Carrier, carriers_of
from contextledger.application.audit.elsewhere import (
    LISTED,
    in_tool_definitions,
    later_artifact,
    only_in_summaries,
    summary_contains,
    textless,
)
from contextledger.application.audit.text_trace import Sighting, shown_as, sightings
from contextledger.application.audit.traced_calls import (
    TracedCall,
    computed_calls,
    recorded_calls,
    rendered,
    run_at,
    sightings_at,
    summaries_caveat,
)
from contextledger.application.audit.why_answer import (
    TURN_ENDED,
    CallFate,
    WhyAnswer,
    reducer_of,
    smallest_change,
)
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.render.renderer import Renderer
from contextledger.application.search.log_search import query_pattern
from contextledger.domain.errors import ValidationError
from contextledger.domain.events import (
    DispositionRun,
)
from contextledger.projections.policy import Policy
from contextledger.projections.presets import get_preset

__all__ = ["CallFate", "WhyAnswer", "why"]

_KEPT = {"verbatim", "pinned", "control"}


def _check_asked(ledger: Ledger, session_id: str, query: str, position: int | None) -> None:
    """Refuse a question ``why`` cannot answer as asked: no text, a text and a position, a position past."""
    if position is None:
        if not query.strip():
            raise ValidationError(
                "why needs a text to trace (or a --position); an empty text is in every message"
            )
        return
    if query.strip():
        raise ValidationError(
            "why traces a text or the event at a position, not both: the text would be ignored "
            f"(give {query!r} alone, or --position {position} alone)"
        )
    head = ledger.version(session_id)
    if not 1 <= position <= head:
        raise ValidationError(f"position {position} is outside session {session_id!r} (1..{head})")


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

    A text is followed as it appears in each call's rendered payload — verbatim, in the kept head of
    a truncated result, in a stub, in a summary or injected block — whichever events carry it. The
    event at ``position`` is followed by its own fate. Recorded ``model_calls`` are used (re-rendered
    from the log to search their text) when the session has them and neither ``policy`` nor ``budget``
    is given; otherwise the calls they would have made (one render before each assistant message) are
    computed.

    Raises:
        ValidationError: an empty ``query`` without ``position``, both a ``query`` and a ``position``, a
            ``position`` outside the session, or a bad regular expression.
    """
    _check_asked(ledger, session_id, query, position)
    pattern = query_pattern(query, regex=regex)
    carriers = carriers_of(ledger, session_id, query, pattern, position, regex=regex)
    if not carriers:
        verdict = (
            textless(ledger, session_id, position)  # a pin, an unpin: not "every text" (an empty query)
            if position is not None
            else _not_held(
                ledger,
                session_id,
                pattern,
                lambda: _own_text(
                    ledger, session_id, pattern, renderer=renderer, policy=policy, budget=budget
                ),
            )
        )
        return WhyAnswer(session_id=session_id, query=query, verdict=verdict, entered_at=None)
    entry = carriers[0]
    source, policy_name, calls = _calls(
        ledger, session_id, entry.position, renderer=renderer, policy=policy, budget=budget
    )
    differ = 0
    fates: list[CallFate] = []
    if position is None:
        sent = {c.position: c.sent for c in carriers}
        quotable = frozenset(c.position for c in carriers if c.quotable)
        signed = frozenset(c.position for c in carriers if c.signed)
        holds: dict[str, bool] = {}

        def summary_holds(summary_id: str) -> bool:
            if summary_id not in holds:
                holds[summary_id] = summary_contains(ledger, session_id, summary_id, pattern) == "exact"
            return holds[summary_id]

        for call in calls:
            found, differs = sightings_at(
                call, pattern, sent, summary_holds, quotable=quotable, signed=signed
            )
            fates.append(_text_fate(call, found, carriers, fates[-1] if fates else None))
            differ += differs
    else:
        fates = [f for f in (_event_fate(c, entry.position) for c in calls) if f is not None]
    answer = WhyAnswer(
        session_id=session_id,
        query=query,
        verdict="",
        entered_at=entry.position,
        entered_kind=entry.kind,
        snippet=entry.snippet,
        calls_source=source,
        calls=tuple(fates),
        caveat=None if source != "computed" else summaries_caveat(ledger, session_id, policy),
        policy=policy_name,
        carried_by=tuple(c.position for c in carriers),
        calls_differ=differ,
    )
    return _verdict(ledger, answer, pattern, carriers)


def _left_again(fates: tuple[CallFate, ...], index: int) -> CallFate | None:
    """The call from which the text is absent for good, when it came back after ``index`` and left again.

    The verdict names the first departure and the first return; a text that returned and is gone now
    must not read as present (the last calls are the ones the agent forgot it in).
    """
    if fates[-1].shown is not None or all(f.shown is None for f in fates[index + 1 :]):
        return None
    last = len(fates) - 1
    while last > index and fates[last - 1].shown is None:
        last -= 1
    return fates[last]


def _carried(carriers: list[Carrier]) -> str:
    named = ", ".join(str(c.position) for c in carriers[:LISTED])
    more = f" and {len(carriers) - LISTED} more" if len(carriers) > LISTED else ""
    return f"carried by event{'s' if len(carriers) > 1 else ''} {named}{more}"


def _verdict(
    ledger: Ledger, answer: WhyAnswer, pattern: re.Pattern[str], carriers: list[Carrier]
) -> WhyAnswer:
    fates = answer.calls
    index = next((i for i, f in enumerate(fates) if f.shown is None), None)
    carried = _carried(carriers)
    if index is None:
        where = f"in all {len(fates)} calls since" if fates else "no model call has been made since"
        verdict = f"still in context: {where} (entered at position {answer.entered_at}; {carried})"
        return msgspec.structs.replace(answer, verdict=verdict)
    left = fates[index]
    back = next((f for f in fates[index + 1 :] if f.shown is not None), None)
    contains = (
        summary_contains(ledger, answer.session_id, left.summary_id, pattern) if left.summary_id else None
    )
    later = next((f for f in fates[index + 1 :] if f.shown and "summary" in f.shown.split("+")), None)
    if later is not None:
        later_id: str | None = later.summary_id
    elif answer.query.strip():  # an event followed by --position has no text to look for in artifacts
        later_id = later_artifact(ledger, answer.session_id, pattern, left.position)
    else:
        later_id = None
    reducer = reducer_of(left.rule)
    dropped = _card_held(fates, index)
    verdict = _left_at(left, dropped, carried)
    if left.summary_id:
        mentions = "mentions" if contains in {"exact", "normalized"} else "does not mention"
        verdict += f"; summary {left.summary_id}, applied at that call, {mentions} it"
    if later is not None:
        verdict += f"; summary {later_id} carries it from call {later.call_id} (position {later.position})"
    elif later_id is not None:
        verdict += f"; summary {later_id}, produced later, carries it but no call has applied it yet"
    if back is not None and back is not later:
        verdict += f"; back in context ({back.shown}) from call {back.call_id}"
    again = _left_again(fates, index)
    if again is not None:
        rule = f" by {again.disposition}, rule {again.rule}" if again.rule else ""
        verdict += (
            f"; absent again from call {again.call_id} (position {again.position}){rule}, and still absent"
        )
    entry = next((c for c in carriers if c.position == left.event), carriers[0])
    change = _smallest_change(ledger, answer.session_id, entry, left)
    if dropped is not None:
        change = f"{_CARD_ADVICE.get(entry.kind, _CARD_CAP)}; or keep the event itself: {change}"
    return msgspec.structs.replace(
        answer,
        verdict=verdict,
        first_left_call=left.call_id,
        first_left_position=left.position,
        disposition=left.disposition,
        rule=left.rule,
        reducer=reducer,
        policy=left.policy or answer.policy,  # the config in force where it left, not the latest call's
        summary_id=left.summary_id,
        summary_contains=contains,
        smallest_change=change,
        left_event=left.event,
        later_summary_id=later_id,
        later_summary_call=later.call_id if later else None,
        later_summary_position=later.position if later else None,
        back_at_call=back.call_id if back else None,
    )


_CARD_CAP = "raise the card's cap (card.max_tokens, card.max_fraction of the target) so it quotes more"
_CARD_ADVICE = {
    "ToolResultRecorded": "raise card.errors (the card lists the newest failed results) or " + _CARD_CAP[6:],
    "AssistantMessageAdded": "raise card.decisions or card.files (the card lists the newest) or "
    + _CARD_CAP[6:],
}
"""What keeps a quote in the card longer, by the kind of event quoted (its lists keep the newest entries)."""


def _left_at(left: CallFate, dropped: CallFate | None, carried: str) -> str:
    """The verdict's opening: the fate at the call it left in, or the card's, which quoted it until then."""
    fate = f"{left.disposition} by {reducer_of(left.rule)} — rule {left.rule} —"
    if dropped is None:
        return f"{fate} at call {left.call_id} (position {left.position}; {carried})"
    return (  # its event's fate is older: what changed at this call is the card, which quoted it until now
        f"left the session-state card at call {left.call_id} (position {left.position}; {carried}): the "
        f"card no longer quotes it; its event was {fate} at call {dropped.call_id} (position "
        f"{dropped.position}) and the card quoted it since"
    )


def _card_held(fates: tuple[CallFate, ...], index: int) -> CallFate | None:
    """The call that gave the event its fate, when the card quoted the text until ``index`` (else None).

    The event's disposition and rule did not change at ``index``: the card, refreshed within its cap and
    the lengths of its lists, stopped quoting it. Naming the event's fate at ``index`` read as a fresh drop.
    """
    if index == 0 or "card" not in (fates[index - 1].shown or "").split("+"):
        return None
    left = fates[index]
    first = index
    while first > 0 and (fates[first - 1].disposition, fates[first - 1].rule) == (
        left.disposition,
        left.rule,
    ):
        first -= 1
    return fates[first] if first < index else None


def _text_fate(
    call: TracedCall, found: tuple[Sighting, ...], carriers: list[Carrier], previous: CallFate | None
) -> CallFate:
    """Where the text shows in this call (``found``), and the fate of the event it is followed through."""
    held = [c.position for c in carriers if c.position <= call.position]
    sources = {p for s in found for p in s.sources}
    shown_from = tuple(p for p in held if p in sources)
    if shown_from:
        event = shown_from[-1]
    elif previous is not None and previous.shown_from:
        event = previous.shown_from[-1]
    elif previous is not None and previous.event is not None:
        event = previous.event
    else:
        event = held[-1]
    run = run_at(call.runs, event)
    disposition: str = run.disposition if run else "dropped"
    rule = run.rule if run else "not-rendered"
    shown = shown_as(found)
    if shown is None and disposition in _KEPT:
        disposition, rule = "not-sent", "not-rendered (the event is sent, but no part of it holds the text)"
        if previous is not None and previous.shown is not None and "reasoning" in previous.shown.split("+"):
            rule = TURN_ENDED
    return CallFate(
        call_id=call.call_id,
        position=call.position,
        disposition=disposition,
        rule=rule,
        summary_id=_summary_of(call, run),
        shown=shown,
        event=event,
        shown_from=shown_from,
        driver=call.driver,
        budget=call.budget,
        policy=call.policy,
        cut_by=call.cut_by,
    )


def _summary_of(call: TracedCall, run: DispositionRun | None) -> str | None:
    """The summary standing for a summarized event: its run's (clip-archive shows several), or the call's."""
    if run is not None and run.disposition == "summarized" and run.summary_id:
        return run.summary_id
    return call.summary_id


def _event_fate(call: TracedCall, position: int) -> CallFate | None:
    run = run_at(call.runs, position)
    if run is None:
        return None
    return CallFate(
        call_id=call.call_id,
        position=call.position,
        disposition=run.disposition,
        rule=run.rule,
        summary_id=_summary_of(call, run),
        shown=run.disposition if run.disposition in _KEPT else None,
        event=position,
        shown_from=(position,) if run.disposition in _KEPT else (),
        driver=call.driver,
        budget=call.budget,
        policy=call.policy,
        cut_by=call.cut_by,
    )


def _calls(
    ledger: Ledger,
    session_id: str,
    entered: int,
    *,
    renderer: Renderer,
    policy: Policy | None,
    budget: int | None,
) -> tuple[str, str | None, Iterator[TracedCall]]:
    """The calls since ``entered``: recorded ones, else those computed under ``policy`` (or the default).

    A ``budget`` (or a ``policy``) asks about calls under it: the recorded calls, made under their own
    budgets, do not answer that, so the calls are computed (``--budget`` alone was silently ignored).
    """
    recorder = CallRecorder(ledger)
    views = [v for v in recorder.calls(session_id) if v.record.position >= entered]
    if views and policy is None and budget is None:
        return "recorded", views[-1].record.policy, recorded_calls(recorder, renderer, views)
    chosen = policy or get_preset("default")  # the CLI's and the report's default: never a bare Policy()
    calls = computed_calls(ledger, session_id, entered, renderer, policy=chosen, budget=budget)
    return "computed", chosen.name, calls


def _own_text(
    ledger: Ledger,
    session_id: str,
    pattern: re.Pattern[str],
    *,
    renderer: Renderer,
    policy: Policy | None,
    budget: int | None,
) -> str | None:
    """The verdict of a text no event or artifact holds but a payload does: contextledger wrote it, or None.

    A summary's header, the session-state card, a stub's or a cut's note are made by the render itself: "never
    held" contradicted the payloads (and the report's "Why not?"). The calls are searched in order (recorded
    ones rendered again, or those computed), up to the first that shows it.
    """
    _, _, calls = _calls(ledger, session_id, 1, renderer=renderer, policy=policy, budget=budget)
    for call in calls:
        kinds = sorted({_OWN_KIND.get(s.shown, s.shown) for s in sightings(rendered(call)[0], pattern)})
        if kinds:
            return (
                f"in no logged event: contextledger wrote it ({', '.join(kinds)}), first sent at call "
                f"{call.call_id} (position {call.position})"
            )
    return None


_OWN_KIND = {
    "summary": "a summary's header",
    "card": "the session-state card",
    "stub": "a stub",
    "truncated": "a cut's note",
    "injected": "an injected block",
}
"""What contextledger writes into a payload, by how a sighting shows (``sightings``; another: its name)."""


def _not_held(
    ledger: Ledger, session_id: str, pattern: re.Pattern[str], own_text: Callable[[], str | None]
) -> str:
    """The verdict of a text no message, call or result holds: where else it is, or never held.

    ``own_text`` searches the payloads (``_own_text``): the last place looked, as it renders calls.
    """
    return (
        in_tool_definitions(ledger, session_id, pattern)
        or only_in_summaries(ledger, session_id, pattern)
        or own_text()
        or "not in the log: the session never held it"
    )


def _smallest_change(ledger: Ledger, session_id: str, entry: Carrier, left: CallFate) -> str:
    """The least config change (or action) that would have kept the event verbatim at that call."""
    later = ledger.events(session_id, after=entry.position, upto=left.position)
    return smallest_change(later, session_id, entry.position, entry.tool_name, left)
