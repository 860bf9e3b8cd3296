"""``model_calls`` audit records: what each render handed to a model kept, cut, stubbed or dropped."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec
from contextledger.application.kernel.id_prefixes import match_prefix, resolve_session
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.kernel.messages import SIDE_STREAM_SEPARATOR, check_stream_id
from contextledger.application.kernel.summary_log import summary_stream
from contextledger.application.render.renderer import Renderer
from contextledger.domain.content import content_address
from contextledger.domain.errors import ReplayMismatchError, ValidationError
from contextledger.domain.events import (
    ItemPinned,
    ItemUnpinned,
    ModelCallFailed,
    ModelCallRecorded,
    ModelCallUsageReported,
    PolicyRegistered,
    SummaryRecorded,
)
from contextledger.projections.context import RenderedContext
from contextledger.projections.dispositions import dispositions_of, tiers_of
from contextledger.projections.policy import Policy
from contextledger.projections.presets import get_preset

__all__ = [
    "CALLS_KIND",
    "CallRecorder",
    "CallView",
    "calls_stream",
    "context_sha",
    "payload_sha",
    "policy_hash",
]

_E = TypeVar("_E", ModelCallRecorded, ModelCallUsageReported, ModelCallFailed)

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


class CallView(msgspec.Struct, frozen=True, kw_only=True):
    """A recorded call joined with the usage the agent reported for it (if any)."""

    record: ModelCallRecorded
    usage: ModelCallUsageReported | None = None
    failure: ModelCallFailed | None = None
    """Set when the call was marked failed (``report_failure``): the model never completed it."""


class CallRecorder:
    """Writes and reads the ``model_calls`` records of sessions (each session's ``::calls`` stream)."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self._registered: set[tuple[str, str]] = set()
        self._pins: dict[str, tuple[int, frozenset[int]]] = {}
        """Per session: how far its log was read, and the positions of pins and unpins up to there."""
        self._known_calls: dict[str, set[str]] = {}
        """Per session: call ids recorded (or read back) by this recorder."""
        self._summaries: dict[str, tuple[int, dict[str, SummaryRecorded]]] = {}
        """Per session: how far its summary stream was read, and the artifacts found up to there."""

    def record(
        self,
        context: RenderedContext,
        policy: Policy | str,
        *,
        payload: Mapping[str, Any] | None = None,
        wire_format: str = "openai",
        call_id: str | None = None,
        driver: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> ModelCallRecorded:
        """Record that ``context`` (sent as ``payload``) was handed to a model; return the record.

        ``driver`` names what made the call (``AgentContext``, a framework adapter), kept in the
        record's ``meta["driver"]``: ``why`` then suggests that driver's settings, not a command line's.
        ``meta`` adds further facts of how the payload was built (the agent loop's reasoning rules).
        ``policy`` is the one ``context`` was rendered under: a ``Policy``, or a preset's name.

        Raises:
            ConfigError: ``policy`` names no preset.
        """
        policy = get_preset(policy) if isinstance(policy, str) else policy
        session_id = context.session_id
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
            meta={**(meta or {}), **({"driver": driver} if driver else {})},
        )
        events.append(record)
        self._append(session_id, events, f"call:{record.call_id}")
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
        if call_id not in known:  # recorded by another recorder or process: look it up by its key
            known.add(self.call(session_id, call_id).record.call_id)
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
        self._append(session_id, [usage], f"usage:{call_id}")
        return usage

    def report_failure(
        self,
        session_id: str,
        call_id: str,
        error: str,
        *,
        partial_text: str | None = None,
        events: int = 0,
    ) -> ModelCallFailed:
        """Mark a recorded call failed (once: a second report of the same call stores nothing)."""
        self.call(session_id, call_id)  # raises ValidationError for an unknown call
        failed = ModelCallFailed(
            call_id=call_id,
            error=error,
            partial_text=partial_text,
            events=events,
            at=self.ledger.clock.now(),
        )
        self._append(session_id, [failed], f"failed:{call_id}")
        return failed

    def _append(self, session_id: str, events: list[Any], key: str) -> None:
        """Append ``events`` at the head of the session's calls stream under idempotency ``key``."""
        stream = calls_stream(session_id)
        self.ledger.log.append(stream, self.ledger.log.version(stream), events, idempotency_key=key)

    def calls(self, session_id: str) -> list[CallView]:
        """Return the session's recorded calls in order, each with its reported usage."""
        records: dict[str, ModelCallRecorded] = {}
        usage: dict[str, ModelCallUsageReported] = {}
        failures: dict[str, ModelCallFailed] = {}
        for recorded in self.ledger.log.read(calls_stream(session_id)):
            event = recorded.event
            if isinstance(event, ModelCallRecorded):
                records[event.call_id] = event
            elif isinstance(event, ModelCallUsageReported):
                usage[event.call_id] = event
            elif isinstance(event, ModelCallFailed):
                failures[event.call_id] = event
        return [
            CallView(record=r, usage=usage.get(r.call_id), failure=failures.get(r.call_id))
            for r in records.values()
        ]

    def resolve(self, given: str, session_id: str | None = None) -> tuple[str, str]:
        """The session and call id ``given`` names: a call id, or a unique prefix of one.

        Searched in ``session_id`` (itself an id or a unique prefix) or else in every session.

        Raises:
            ValidationError: no call has this id or starts with it.
            AmbiguousIdError: several calls start with it.
            SessionNotFoundError: ``session_id`` names no session.
        """
        if session_id is not None:
            sessions = [resolve_session(self.ledger, session_id)]
        else:
            sessions = [info.session_id for info in self.ledger.sessions()]
        owner = {view.record.call_id: session for session in sessions for view in self.calls(session)}
        found = match_prefix("call", given, owner)
        if found is None:
            if session_id is not None:
                raise ValidationError(f"session {sessions[0]!r} has no recorded call {given!r}")
            raise ValidationError(f"no session has a recorded call {given!r}")
        return owner[found], found

    def call(self, session_id: str, call_id: str) -> CallView:
        """Return one recorded call, read by its keys (``call:<id>``, ``usage:<id>``, ``failed:<id>``).

        The cost does not grow with the number of calls the session has: the record and its usage
        are found through the key index, and only their own positions are read and decoded.
        """
        stream = calls_stream(session_id)
        record = self._keyed(stream, f"call:{call_id}", ModelCallRecorded)
        if record is None or record.call_id != call_id:
            raise ValidationError(f"session {session_id!r} has no recorded call {call_id!r}")
        usage = self._keyed(stream, f"usage:{call_id}", ModelCallUsageReported)
        failure = self._keyed(stream, f"failed:{call_id}", ModelCallFailed)
        return CallView(record=record, usage=usage, failure=failure)

    def _keyed(self, stream: str, key: str, kind: type[_E]) -> _E | None:
        """The event of type ``kind`` that the append under idempotency key ``key`` stored, or None."""
        positions = self.ledger.log.lookup_idempotency_key(stream, key)
        if not positions:
            return None
        for recorded in self.ledger.log.read(stream, after=positions[0] - 1, upto=positions[-1]):
            if isinstance(recorded.event, kind):
                return recorded.event
        return None

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
            found = found | {r.position for r in new if isinstance(r.event, ItemPinned | ItemUnpinned)}
            self._pins[session_id] = (upto, found)
        return frozenset(p for p in found if p <= upto)

    def _policy_known(self, session_id: str, key: str) -> bool:
        return any(
            isinstance(r.event, PolicyRegistered) and r.event.policy_hash == key
            for r in self.ledger.log.read(calls_stream(session_id))
        )

    def _summary(self, session_id: str, summary_id: str | None) -> SummaryRecorded | None:
        """The artifact ``summary_id``; the summary stream is read once, then only what was added since."""
        if summary_id is None:
            return None
        read, found = self._summaries.get(session_id, (0, {}))
        if summary_id not in found:
            for recorded in self.ledger.log.read(summary_stream(session_id), after=read):
                read = recorded.position
                if isinstance(recorded.event, SummaryRecorded):
                    found[recorded.event.summary_id] = recorded.event
            self._summaries[session_id] = (read, found)
        return found.get(summary_id)
