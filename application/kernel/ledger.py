"""The ledger service: the append API over an event store, with validation at the boundary."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Self, Unpack

from contextledger.application.kernel import pins
from contextledger.application.kernel.collector import collector_paused
from contextledger.application.kernel.drafting import EventDrafter, tool_call, tool_schema
from contextledger.application.kernel.erasure import forget_session
from contextledger.application.kernel.fork import ForkAwareLog, fork_parent, fork_session
from contextledger.application.kernel.logs import get_logger
from contextledger.application.kernel.messages import (
    AssistantMessage,
    PlainMessage,
    ToolCallIn,
    ToolResult,
    UserMessage,
    check_idempotency_key,
    check_list,
    check_position,
    check_session_fields,
    check_session_id,
    check_stream_id,
    parse_for_append,
)
from contextledger.application.kernel.replays import check_replay
from contextledger.application.kernel.rules_cache import RulesCache
from contextledger.application.kernel.session_port import MessageLike, SessionSpec, check_keywords
from contextledger.application.kernel.summary_log import ArtifactSpec, SummaryStream, record_summary
from contextledger.application.kernel.wiring import Ports
from contextledger.domain.content import BlobText, InlineText, Text
from contextledger.domain.errors import (
    ConcurrencyConflictError,
    InvalidMessageError,
    SessionExistsError,
    SessionNotFoundError,
    ValidationError,
)
from contextledger.domain.events import (
    TIME_KEY,
    TIME_UNKNOWN,
    AnyEvent,
    Recorded,
    SessionForgotten,
    SessionStarted,
    SummaryRecorded,
)
from contextledger.domain.limits import MAX_DEPTH, too_deep
from contextledger.domain.ports import AppendOutcome, SessionInfo, StreamAppend
from contextledger.domain.session import SessionState

__all__ = ["DEFAULT_BLOB_THRESHOLD", "Ledger"]

log = get_logger(__name__)

ParsedMessage = UserMessage | AssistantMessage | ToolResult | PlainMessage
DEFAULT_BLOB_THRESHOLD = 8 * 1024
"""Texts larger than this many UTF-8 bytes are stored once, content-addressed, outside the event."""


def _id_for(idempotency_key: str | None) -> str | None:
    """A session id derived from an idempotency key, so a retried start finds its first session."""
    if idempotency_key is None:
        return None
    return "s-" + hashlib.sha256(idempotency_key.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class Ledger:
    """Append and read agent sessions as immutable event streams.

    Every write validates first and then appends in one transaction, so a rejected write
    changes nothing. ``expected_version`` gives optimistic concurrency; ``idempotency_key``
    makes a retried write a no-op that returns the positions of the first.

    Pins, forks and caller-recorded summaries are services over the ledger's port
    (``SessionLedger``: ``kernel/pins.py``, ``kernel/fork.py``, ``kernel/summary_log.py``); the
    methods of the same names here only delegate to them.
    """

    def __init__(
        self,
        ports: Ports,
        *,
        blob_threshold: int = DEFAULT_BLOB_THRESHOLD,
        cache_size: int = 1024,
    ) -> None:
        """Wire the ledger to its ports (built by the composition root, ``contextledger.open_ledger``)."""
        self.ports = ports
        self.forks = ForkAwareLog(ports.log)
        self.log = self.forks
        """The event log; a forked session reads as its parent's prefix then its own events."""
        self.clock = ports.clock
        self.ids = ports.ids
        self._drafts = EventDrafter(ports.clock, blob_threshold)
        self._rules = RulesCache(self.log, ports.snapshots, cache_size)
        self._lock = threading.RLock()
        """Serializes read-check-append-apply, so threads sharing this ledger never race on rules state."""

    # -- writing -----------------------------------------------------------------------------

    def start_session(self, **spec: Unpack[SessionSpec]) -> str:
        """Start a session (optionally with its first messages, atomically) and return its id.

        Takes the keywords of ``SessionSpec``. With an ``idempotency_key`` and no ``session_id``, the id
        is derived from the key, so a retried call returns the same session instead of starting a second.
        """
        idempotency_key = check_idempotency_key(spec.get("idempotency_key"))
        session_id = spec.get("session_id") or _id_for(idempotency_key) or self.ids.new_id()
        events, blobs = self._session_events(session_id, spec)
        with self._lock:
            self._append(session_id, events, blobs, idempotency_key=idempotency_key)
        return session_id

    def start_sessions(self, sessions: Iterable[SessionSpec]) -> list[str]:
        """Start several sessions in ONE transaction: all are stored, or none (e.g. one transcript file).

        Each takes the keywords of ``start_session`` (``SessionSpec``). A session whose idempotency key
        is already stored is skipped (a retry), another that already exists raises
        ``SessionExistsError``. ``sessions`` is drawn one at a time and each session is validated and
        written as it comes, inside the one transaction (ADR 0041): an error raised by a session, or
        by drawing the next one, stores none of them. Each session's rules state catches up from the
        store when next used.
        """
        with self._lock:
            ids: list[str] = []
            self.log.append_streamed(self._started(sessions, ids))
        return ids

    def _started(
        self, sessions: Iterable[SessionSpec], ids: list[str]
    ) -> Iterator[tuple[StreamAppend, dict[str, str]]]:
        """Validate each session as it is drawn; yield the append (with its blobs) of each new one."""
        started: set[str] = set()
        for spec in sessions:
            key = check_idempotency_key(spec.get("idempotency_key"))
            session_id = spec.get("session_id") or _id_for(key) or self.ids.new_id()
            ids.append(session_id)
            events, session_blobs = self._session_events(session_id, spec)
            earlier = None if key is None else self.log.lookup_idempotency_key(session_id, key)
            if key is not None and earlier is not None:
                check_replay(self.log, session_id, key, earlier, events)
                continue  # stored by an earlier call with the same key: a retry stores nothing new
            if session_id in started:
                raise SessionExistsError(session_id)
            started.add(session_id)
            self._state(session_id).check(events)
            yield (
                StreamAppend(
                    stream_id=session_id, expected_version=0, events=tuple(events), idempotency_key=key
                ),
                session_blobs,
            )

    def _session_events(self, session_id: str, spec: SessionSpec) -> tuple[list[AnyEvent], dict[str, str]]:
        """Validate a start and draft its events (the id and idempotency key in ``spec`` are not read)."""
        check_keywords("start_session", spec, SessionSpec)
        check_session_id(session_id)
        metadata = spec.get("metadata")
        check_session_fields(
            system_prompt=spec.get("system_prompt", ""),
            model=spec.get("model"),
            tools=spec.get("tools", ()),
            metadata=metadata,
        )
        if metadata is not None and too_deep(dict(metadata)):
            msg = f"session metadata nests deeper than {MAX_DEPTH} levels"
            raise InvalidMessageError(msg)
        parent = fork_parent(self, session_id, spec.get("parent"))
        at, unknown_time = spec.get("at"), spec.get("unknown_time", False)
        started = SessionStarted(
            session_id=session_id,
            system_prompt=spec.get("system_prompt", ""),
            model=spec.get("model"),
            tools=tuple(tool_schema(t) for t in spec.get("tools", ())),
            metadata=dict(metadata or {}),
            parent=parent,
            at=at if at is not None or unknown_time else self.clock.now(),
            meta={TIME_KEY: TIME_UNKNOWN} if at is None and unknown_time else {},
        )
        state = SessionState(session_id)
        blobs: dict[str, str] = {}
        issued: dict[str, str] = {}
        events: list[AnyEvent] = [started]
        parsed = parse_for_append(spec.get("messages", ()))
        events.extend(self._drafts.events(parsed, state, issued, blobs))
        return events, blobs

    def append(
        self,
        session_id: str,
        message: MessageLike,
        *,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
    ) -> int:
        """Validate and append one message; return its position."""
        positions = self.append_many(
            session_id, [message], expected_version=expected_version, idempotency_key=idempotency_key
        )
        if not positions:  # e.g. content given as an empty list of parts: nothing was written
            msg = "the message holds nothing to append (no text, no parts)"
            raise InvalidMessageError(msg)
        return positions[0]

    def append_many(
        self,
        session_id: str,
        messages: Sequence[MessageLike],
        *,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
    ) -> tuple[int, ...]:
        """Validate and append several messages in one transaction; return their positions.

        A batch runs with the cyclic collector paused (``collector_paused``): its events and rows are
        young objects, without cycles, that the collector would walk and promote to find nothing.
        """
        check_stream_id(session_id)
        check_list(messages, "messages")
        parsed = parse_for_append(messages)  # a provider message may hold several
        if len(parsed) > 1:
            with self._lock, collector_paused():
                return self._append_locked(session_id, parsed, expected_version, idempotency_key)
        with self._lock:  # one message: no pause, no ``nullcontext`` entered in its place (ADR 0052)
            return self._append_locked(session_id, parsed, expected_version, idempotency_key)

    def _append_locked(
        self,
        session_id: str,
        parsed: Sequence[ParsedMessage],
        expected_version: int | None,
        idempotency_key: str | None,
    ) -> tuple[int, ...]:
        """``append_many``'s work under the lock: on the cached state when it holds, else in the turn."""
        # A cached state the stream is still at (the store checks atomically) is what the turn would
        # read; a conflict, or a check failed on a state maybe behind, stores nothing: the turn decides.
        state = None if idempotency_key is not None else self._rules.cached(session_id)
        if state is not None and state.exists and expected_version in {None, state.version}:
            try:  # (``suppress`` as a ``try``: one context manager less per append)
                return self._append_parsed(session_id, parsed, state, expected_version=expected_version)
            except (ConcurrencyConflictError, ValidationError):
                pass
        with self.log.writer_turn(session_id):  # writers of one session take turns
            state = self._state(session_id)
            if not state.exists:
                raise SessionNotFoundError(session_id)
            options = {"expected_version": expected_version, "idempotency_key": idempotency_key}
            return self._append_parsed(session_id, parsed, state, **options)

    def _append_parsed(
        self, session_id: str, parsed: Sequence[ParsedMessage], state: SessionState, **options: Any
    ) -> tuple[int, ...]:
        """Draft ``parsed`` after ``state`` and append them (``options``: of ``_append``); the positions."""
        blobs: dict[str, str] = {}
        issued: dict[str, str] = {}
        events = self._drafts.events(parsed, state, issued, blobs)
        return self._append(session_id, events, blobs, state=state, **options).positions

    def add_user_message(self, session_id: str, content: str, **options: Any) -> int:
        """Append what the user said; return its position.

        Text given as an exact ``str`` is passed as the plain dict ``{"role": "user", "content": ...}``,
        which ``parse_for_append`` keeps as a plain message (no model validated: a ``str`` is valid as
        it is, ADR 0052); anything else is validated by ``UserMessage`` as before.
        """
        message = (
            {"role": "user", "content": content} if type(content) is str else UserMessage(content=content)
        )
        return self.append(session_id, message, **options)

    def add_assistant_message(
        self,
        session_id: str,
        content: str | None = None,
        *,
        tool_calls: Sequence[ToolCallIn | Mapping[str, Any]] = (),
        reasoning: str | None = None,
        model: str | None = None,
        **options: Any,
    ) -> int:
        """Append the model's answer with its tool calls; return its position."""
        calls = tuple(tool_call(c) for c in check_list(tool_calls, "tool_calls"))
        message = AssistantMessage(content=content, tool_calls=calls, reasoning=reasoning, model=model)
        return self.append(session_id, message, **options)

    def add_tool_result(
        self,
        session_id: str,
        call_id: str,
        content: str,
        *,
        is_error: bool = False,
        tool_name: str | None = None,
        **options: Any,
    ) -> int:
        """Append the result of a tool call the session issued; return its position."""
        message = ToolResult(call_id=call_id, content=content, is_error=is_error, tool_name=tool_name)
        return self.append(session_id, message, **options)

    # -- reading -----------------------------------------------------------------------------

    @property
    def store_url(self) -> str:
        """The URL of the database this ledger writes to."""
        return self.ports.url

    def events(self, session_id: str, *, after: int = 0, upto: int | None = None) -> list[Recorded]:
        """Return the session's events with positions in ``(after, upto]``."""
        check_position(after, "after")
        check_position(upto, "upto", optional=True)
        events = self.log.read(session_id, after=after, upto=upto)
        if not events and self.log.version(session_id) == 0:
            raise SessionNotFoundError(session_id)
        return events

    def summaries(self, session_id: str) -> list[SummaryRecorded]:
        """Return the summary artifacts stored for a session, oldest first."""
        return SummaryStream(self.log, session_id).artifacts()

    def version(self, session_id: str) -> int:
        """Return the position of the session's last event; raise if the session does not exist."""
        version = self.log.version(session_id)
        if version == 0:
            raise SessionNotFoundError(session_id)
        return version

    def sessions(self) -> list[SessionInfo]:
        """Return every session in the ledger, oldest first."""
        return self.log.sessions()

    def text(self, text: Text | None) -> str:
        """Return the full text of an event's content, reading the blob if it is stored apart."""
        if text is None:
            return ""
        if isinstance(text, InlineText):
            return text.text
        if not isinstance(text, BlobText):
            msg = f"text() takes an event's content (InlineText or BlobText), not {type(text).__name__}"
            raise InvalidMessageError(msg)
        return self.ports.blobs.read_blob(text.sha256)

    def stored_text(self, text: str, blobs: dict[str, str]) -> Text:
        """Return ``text`` as an event stores it: inline, or a blob reference whose blob joins ``blobs``."""
        return self._drafts.text(text, blobs)

    def close(self) -> None:
        """Release the store's connections."""
        self.ports.close()

    def __enter__(self) -> Self:
        """Use the ledger as a context manager that closes it."""
        return self

    def __exit__(self, *_: object) -> None:
        """Close the ledger."""
        self.close()

    # -- pins, forks, summaries: services over this ledger (``SessionLedger``) -------------------

    def append_built(
        self, session_id: str, build: Callable[[], Sequence[AnyEvent]], **options: Any
    ) -> tuple[int, ...]:
        """Build events under the write lock, check and append them in one transaction; return positions.

        ``options``: ``expected_version``, ``idempotency_key``. An empty build appends nothing.
        """
        with self._lock, self.log.writer_turn(session_id):  # writers of one session take turns
            events = list(build())
            return self._append(session_id, events, {}, **options).positions if events else ()

    def pin(self, session_id: str, position: int, reason: str = "", **options: Any) -> int:
        """Pin the event at ``position``: the next render shows it verbatim (``pins.pin``); return the pin."""
        check_position(position)
        return pins.pin(self, session_id, position, reason, **options)

    def unpin(self, session_id: str, position: int, **options: Any) -> int:
        """Lift a pin (``pins.unpin``); return the position of the unpin event."""
        check_position(position)
        return pins.unpin(self, session_id, position, **options)

    def pin_span(
        self, session_id: str, first: int, last: int, reason: str = "", **options: Any
    ) -> tuple[int, ...]:
        """Pin every message of ``first..last`` in one transaction (``pins.pin_span``); return the pins."""
        check_position(first, "first")
        check_position(last, "last")
        return pins.pin_span(self, session_id, first, last, reason, **options)

    def unpin_span(self, session_id: str, first: int, last: int, **options: Any) -> tuple[int, ...]:
        """Lift the pins of every message of ``first..last`` (``pins.unpin_span``); return the unpins."""
        check_position(first, "first")
        check_position(last, "last")
        return pins.unpin_span(self, session_id, first, last, **options)

    def fork(self, session_id: str, at: int, *, from_summary: bool = False, **options: Any) -> str:
        """Start a session continuing ``session_id`` after ``at``, nothing copied (``fork_session``)."""
        check_position(at, "at")
        return fork_session(self, session_id, at, from_summary=from_summary, **options)

    def forget(self, session_id: str, *, reason: str, by: str = "unspecified") -> SessionForgotten:
        """Erase the session's content for good, leaving a tombstone (``erasure.forget_session``)."""
        with self._lock:
            return forget_session(self.ports, session_id, reason=reason, by=by)

    def record_summary(self, session_id: str, **artifact: Unpack[ArtifactSpec]) -> SummaryRecorded:
        """Store a summary artifact in the session's summary stream (``summary_log.record_summary``)."""
        return record_summary(self, session_id, **artifact)

    # -- internals ---------------------------------------------------------------------------

    def _append(
        self,
        session_id: str,
        events: list[AnyEvent],
        blobs: dict[str, str],
        *,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
        state: SessionState | None = None,
    ) -> AppendOutcome:
        idempotency_key = check_idempotency_key(idempotency_key)
        expected_version = check_position(expected_version, "expected_version", optional=True)
        if idempotency_key is not None:
            earlier = self.log.lookup_idempotency_key(session_id, idempotency_key)
            if earlier is not None:
                check_replay(self.log, session_id, idempotency_key, earlier, events)
                return AppendOutcome(earlier, replayed=True)
        state = state or self._state(session_id)
        if expected_version is not None and expected_version != state.version:
            raise ConcurrencyConflictError(session_id, expected_version)
        state.check(events)
        due = self._rules.snapshot_after(state, events)  # stored in the append's transaction
        snapshot = None if due is None else due[0]
        outcome = self.log.append(
            session_id,
            state.version,
            events,
            blobs=blobs,
            idempotency_key=idempotency_key,
            snapshot=snapshot,
        )
        if outcome.replayed:
            if idempotency_key is not None:
                check_replay(self.log, session_id, idempotency_key, outcome.positions, events)
            return outcome
        if due is not None:  # the state the stored snapshot holds: the events are applied to it
            self._rules.remember(due[1], snapshot)
            return outcome
        state.apply_all(events)
        self._rules.remember(state)
        return outcome

    def _state(self, session_id: str) -> SessionState:
        """Return the cached rules state of a session, caught up with the store."""
        return self._rules.get(session_id)
