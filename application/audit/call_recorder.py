"""``model_calls`` audit records: what each render handed to a model kept, cut, stubbed or dropped."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.kernel.messages import SIDE_STREAM_SEPARATOR, check_stream_id
from contextledger.application.kernel.summary_log import SummaryStream
from contextledger.application.render.renderer import Renderer
from contextledger.domain.content import content_address
from contextledger.domain.errors import ReplayMismatchError, ValidationError
from contextledger.domain.events import (
    Disposition,
    DispositionRun,
    ItemPinned,
    ItemUnpinned,
    ModelCallRecorded,
    ModelCallUsageReported,
    PolicyRegistered,
    SummaryRecorded,
    TokenTiers,
)
from contextledger.projections.context import RenderedContext
from contextledger.projections.policy import Policy

__all__ = [
    "CALLS_KIND",
    "CallRecorder",
    "CallView",
    "calls_stream",
    "dispositions_of",
    "payload_sha",
    "policy_hash",
    "tiers_of",
]

_ACTION: dict[str, Disposition] = {
    "kept": "verbatim",
    "pinned": "pinned",
    "truncated": "truncated",
    "stubbed": "stubbed",
    "summarized": "summarized",
    "dropped": "dropped",
}
_KIND: dict[str, Disposition] = {"message": "verbatim", "truncated": "truncated", "stub": "stubbed"}


CALLS_KIND = "calls"
"""The suffix of a session's model-call stream: ``<session>::calls``."""


def calls_stream(session_id: str) -> str:
    """Return the id of the stream that holds a session's model-call records."""
    return f"{check_stream_id(session_id)}{SIDE_STREAM_SEPARATOR}{CALLS_KIND}"


def policy_hash(policy: Policy) -> str:
    """Return the hash under which a policy's full text is registered."""
    return content_address(policy.fingerprint())[:16]


def payload_sha(payload: Mapping[str, Any]) -> str:
    """Return the hash of a wire payload: its JSON with sorted keys, as a provider would receive it."""
    return content_address(msgspec.json.encode(payload, order="sorted").decode())


def context_sha(context: RenderedContext) -> str:
    """Return the hash of a rendered context (provider-neutral)."""
    return content_address(msgspec.json.encode(context).decode())


def tiers_of(context: RenderedContext) -> TokenTiers:
    """Split the rendered tokens by tier; the tiers add up to ``context.tokens``."""
    summary = history = results = injected = 0
    for message in context.messages:
        if message.kind == "summary":
            summary += message.tokens
        elif message.kind == "injection":
            injected += message.tokens
        elif message.role == "tool":
            results += message.tokens
        else:
            history += message.tokens
    return TokenTiers(
        system=context.system_tokens,
        tools=context.tools_tokens,
        summary=summary,
        history=history,
        tool_results=results,
        injected=injected,
    )


Fate = tuple[Disposition, str, str | None]


_PRECEDENCE = {"summarized": 0, "dropped": 1, "stubbed": 2, "truncated": 3, "pinned": 4, "verbatim": 5}
"""For an event no message shows, the first of these that a decision gives it is its fate."""


def _from_decisions(context: RenderedContext) -> dict[int, Fate]:
    fate: dict[int, Fate] = {}
    for decision in context.decisions:
        disposition = _ACTION[decision.action]
        summary_id = context.summary_id if decision.action == "summarized" else None
        for position in range(decision.first, decision.last + 1):
            known = fate.get(position)
            if known is None or _PRECEDENCE[disposition] < _PRECEDENCE[known[0]]:
                fate[position] = (disposition, decision.rule, summary_id)
    return fate


def _pinned(context: RenderedContext) -> set[int]:
    return {p for d in context.decisions if d.action == "pinned" for p in range(d.first, d.last + 1)}


def _from_messages(context: RenderedContext, fate: dict[int, Fate]) -> set[int]:
    """Label every shown event by its own message; return the shown positions."""
    pinned = _pinned(context)
    rules: dict[str, str] = {d.action: d.rule for d in context.decisions}
    shown: set[int] = set()
    for message in context.messages:
        kind = _KIND.get(message.kind)
        if kind is None:
            continue
        for position in message.sources:
            shown.add(position)
            if position in pinned:
                fate[position] = ("pinned", fate.get(position, ("pinned", "pinned", None))[1], None)
            elif kind == "verbatim":
                fate[position] = ("verbatim", "verbatim", None)
            else:
                labelled = fate.get(position)
                rule = (
                    labelled[1]
                    if labelled is not None and labelled[0] == kind
                    else rules.get(kind, message.kind)
                )
                fate[position] = (kind, rule, None)
    return shown


def dispositions_of(
    context: RenderedContext, controls: frozenset[int] = frozenset()
) -> tuple[DispositionRun, ...]:
    """Return the fate of every position 1..``context.position`` in runs, exact per event.

    Decisions give the rule of each range; each shown message then says exactly what happened to its
    own event (a range labelled ``truncated`` may hold untouched results), a summary stands for the
    positions of its span not shown, and ``controls`` (pins, unpins) are events with no text.
    """
    fate = _from_decisions(context)
    shown = _from_messages(context, fate)
    for position, (disposition, _, _) in list(fate.items()):
        if position not in shown and disposition in {"verbatim", "pinned", "truncated", "stubbed"}:
            fate[position] = ("dropped", "not-rendered", None)  # labelled as kept by a range, yet not shown
    fate[1] = ("pinned", "system", None) if context.system else ("control", "session-start", None)
    for position in controls:
        fate[position] = ("control", "control", None)
    runs: list[DispositionRun] = []
    for position in range(1, context.position + 1):
        disposition, rule, summary_id = fate.get(position, ("dropped", "not-rendered", None))
        last = runs[-1] if runs else None
        if last is not None and (last.disposition, last.rule, last.summary_id) == (
            disposition,
            rule,
            summary_id,
        ):
            runs[-1] = DispositionRun(last.first, position, disposition, rule, summary_id)
        else:
            runs.append(DispositionRun(position, position, disposition, rule, summary_id))
    return tuple(runs)


class CallView(msgspec.Struct, frozen=True, kw_only=True):
    """A recorded call joined with the usage the agent reported for it (if any)."""

    record: ModelCallRecorded
    usage: ModelCallUsageReported | None = None


class CallRecorder:
    """Writes and reads the ``model_calls`` records of sessions (each session's ``::calls`` stream)."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self._registered: set[tuple[str, str]] = set()
        self._pins: dict[str, tuple[int, frozenset[int]]] = {}
        """Per session: how far its log was read, and the positions of pins and unpins up to there."""
        self._known_calls: dict[str, set[str]] = {}
        """Per session: call ids recorded (or read back) by this recorder."""

    def record(
        self,
        context: RenderedContext,
        policy: Policy,
        *,
        payload: Mapping[str, Any] | None = None,
        wire_format: str = "openai",
        call_id: str | None = None,
    ) -> ModelCallRecorded:
        """Record that ``context`` (sent as ``payload``) was handed to a model; return the record."""
        session_id = context.session_id
        stream = calls_stream(session_id)
        key = policy_hash(policy)
        events: list[Any] = []
        if (session_id, key) not in self._registered and not self._policy_known(session_id, key):
            events.append(
                PolicyRegistered(policy_hash=key, name=policy.name, policy_json=policy.fingerprint())
            )
        summary = self._summary(session_id, context.summary_id)
        controls = self._controls(session_id, context.position)
        prefix = context.messages[: context.stable_prefix]
        record = ModelCallRecorded(
            call_id=call_id or "call-" + self.ledger.ids.new_id(),
            session_id=session_id,
            position=context.position,
            policy=policy.name,
            policy_hash=key,
            budget=context.budget,
            tokenizer=context.tokenizer,
            tokens=context.tokens,
            tiers=tiers_of(context),
            dispositions=dispositions_of(context, controls),
            summary_id=context.summary_id,
            summary_span=(summary.covers_from, summary.covers_through) if summary else None,
            summary_round=summary.round if summary else None,
            context_sha=context_sha(context),
            payload_sha=payload_sha(payload) if payload is not None else "",
            prefix_sha=content_address(context.system + msgspec.json.encode(prefix).decode()),
            wire_format=wire_format,
            stable_prefix=context.stable_prefix,
            at=self.ledger.clock.now(),
        )
        events.append(record)
        self.ledger.log.append(
            stream, self.ledger.log.version(stream), events, idempotency_key=f"call:{record.call_id}"
        )
        self._registered.add((session_id, key))
        self._known_calls.setdefault(session_id, set()).add(record.call_id)
        return record

    def report_usage(
        self,
        session_id: str,
        call_id: str,
        *,
        input_tokens: int | None = None,
        cached_tokens: int | None = None,
        cache_write_tokens: int | None = None,
        output_tokens: int | None = None,
        latency_ms: float | None = None,
        model: str | None = None,
    ) -> ModelCallUsageReported:
        """Join the provider's usage report to a recorded call."""
        known = self._known_calls.setdefault(session_id, set())
        if call_id not in known:  # recorded by another recorder or process: read the calls back once
            known.update(v.record.call_id for v in self.calls(session_id))
        if call_id not in known:
            raise ValidationError(f"session {session_id!r} has no recorded call {call_id!r}")
        usage = ModelCallUsageReported(
            call_id=call_id,
            input_tokens=input_tokens,
            cached_tokens=cached_tokens,
            cache_write_tokens=cache_write_tokens,
            output_tokens=output_tokens,
            latency_ms=latency_ms,
            model=model,
            at=self.ledger.clock.now(),
        )
        stream = calls_stream(session_id)
        self.ledger.log.append(
            stream, self.ledger.log.version(stream), [usage], idempotency_key=f"usage:{call_id}"
        )
        return usage

    def calls(self, session_id: str) -> list[CallView]:
        """Return the session's recorded calls in order, each with its reported usage."""
        records: dict[str, ModelCallRecorded] = {}
        usage: dict[str, ModelCallUsageReported] = {}
        for recorded in self.ledger.log.read(calls_stream(session_id)):
            event = recorded.event
            if isinstance(event, ModelCallRecorded):
                records[event.call_id] = event
            elif isinstance(event, ModelCallUsageReported):
                usage[event.call_id] = event
        return [CallView(record=r, usage=usage.get(r.call_id)) for r in records.values()]

    def call(self, session_id: str, call_id: str) -> CallView:
        """Return one recorded call."""
        for view in self.calls(session_id):
            if view.record.call_id == call_id:
                return view
        raise ValidationError(f"session {session_id!r} has no recorded call {call_id!r}")

    def rerender(
        self, renderer: Renderer, session_id: str, call_id: str
    ) -> tuple[ModelCallRecorded, RenderedContext]:
        """Render a recorded call again from the log and artifacts; raise unless it hashes as recorded."""
        record = self.call(session_id, call_id).record
        if renderer.counter.name != record.tokenizer:
            raise ValidationError(
                f"call {call_id} was counted with {record.tokenizer}, not {renderer.counter.name}"
            )
        policy = self.policy(session_id, record.policy_hash)
        context = renderer.render(session_id, policy, at=record.position, budget=record.budget)
        if context_sha(context) != record.context_sha:
            raise ReplayMismatchError(
                f"call {call_id} of session {session_id!r} renders differently now "
                f"({context.tokens:,} tokens, recorded {record.tokens:,})"
            )
        return record, context

    def policy(self, session_id: str, key: str) -> Policy:
        """Return the policy registered under ``key`` for the session's calls."""
        for recorded in self.ledger.log.read(calls_stream(session_id)):
            event = recorded.event
            if isinstance(event, PolicyRegistered) and event.policy_hash == key:
                return Policy.model_validate_json(event.policy_json)
        raise ValidationError(f"session {session_id!r} has no policy registered under {key!r}")

    def _controls(self, session_id: str, upto: int) -> frozenset[int]:
        """Positions of pins and unpins up to ``upto``; each call reads only the events since the last one."""
        read, found = self._pins.get(session_id, (0, frozenset()))
        if upto > read:
            new = self.ledger.events(session_id, after=read, upto=upto)
            found = found | {r.seq for r in new if isinstance(r.event, ItemPinned | ItemUnpinned)}
            self._pins[session_id] = (upto, found)
        return frozenset(p for p in found if p <= upto)

    def _policy_known(self, session_id: str, key: str) -> bool:
        return any(
            isinstance(r.event, PolicyRegistered) and r.event.policy_hash == key
            for r in self.ledger.log.read(calls_stream(session_id))
        )

    def _summary(self, session_id: str, summary_id: str | None) -> SummaryRecorded | None:
        if summary_id is None:
            return None
        for artifact in SummaryStream(self.ledger.log, session_id).artifacts():
            if artifact.summary_id == summary_id:
                return artifact
        return None
