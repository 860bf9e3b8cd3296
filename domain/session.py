"""The rules of a session stream: what may be appended given what is already there."""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sequence

from contextledger.domain.errors import (
    DuplicateToolCallError,
    DuplicateToolResultError,
    InvalidMessageError,
    SessionExistsError,
    SessionNotFoundError,
    UnknownToolCallError,
)
from contextledger.domain.events import (
    EVENT_TYPES,
    AnyEvent,
    AssistantMessageAdded,
    ItemPinned,
    ItemUnpinned,
    SessionStarted,
    SummaryRecorded,
    ToolResultRecorded,
)

__all__ = ["CallPairing", "SessionState"]

_RULED = (
    SummaryRecorded,
    SessionStarted,
    AssistantMessageAdded,
    ToolResultRecorded,
    ItemPinned,
    ItemUnpinned,
)
"""The event types a session rule reads beyond their position (``SessionState._check_one``)."""

_UNRULED = frozenset(kind for kind in EVENT_TYPES if not issubclass(kind, _RULED))
"""Exact event types that no rule reads after the start and that ``apply`` only counts (a user message):
a batch of these after ``SessionStarted`` passes ``check``, and applying it only moves the version."""


class CallPairing:
    """The pairing rule of tool calls and results, defined once for the ledger and the importers.

    Providers reuse call ids inside one conversation (gpt-4o issues ``call_X`` again once ``call_X``
    is answered), so an id names a call *occurrence* only together with the moment it is used:

    - a call id may be issued when no call with that id awaits a result; a duplicate among the
      pending calls (or twice in one assistant message) is ``DuplicateToolCallError``;
    - a result answers the pending call of its id (by the first rule there is at most one: the
      latest call issued with that id). The occurrence it answers is identified by the position of
      the assistant event that issued it, which ``answer`` returns;
    - a result for an id no call ever used is ``UnknownToolCallError``; for an id whose calls are
      all answered, ``DuplicateToolResultError``.

    Ids are kept exactly as the provider gave them; nothing is renamed.

    Args:
        session_id: Named in the errors.
        names: Every call id ever issued -> the tool name of its latest call.
        pending: Call ids awaiting a result -> the position of the event that issued them, in
            issue order.
    """

    __slots__ = ("names", "pending", "session_id")

    def __init__(
        self,
        session_id: str = "",
        names: MutableMapping[str, str] | None = None,
        pending: MutableMapping[str, int] | None = None,
    ) -> None:
        self.session_id = session_id
        self.names: MutableMapping[str, str] = {} if names is None else names
        self.pending: MutableMapping[str, int] = {} if pending is None else pending

    def issue(self, calls: Iterable[tuple[str, str]], position: int = 0) -> None:
        """Issue the ``(call id, tool name)`` calls of one assistant message at ``position``.

        All calls are checked before any is recorded, so a refused message changes nothing.

        Raises:
            DuplicateToolCallError: An id is pending, or given twice in ``calls``.
        """
        batch = list(calls)
        self.check_issue(call_id for call_id, _ in batch)
        for call_id, name in batch:
            self.names[call_id] = name
            self.pending[call_id] = position

    def check_issue(self, call_ids: Iterable[str]) -> None:
        """Raise the error ``issue`` would raise for calls with ``call_ids``; change nothing."""
        seen: set[str] = set()
        for call_id in call_ids:
            if call_id in self.pending or call_id in seen:
                raise DuplicateToolCallError(self.session_id, call_id)
            seen.add(call_id)

    def answer(self, call_id: str) -> int:
        """Record the result of ``call_id``; return the position of the call occurrence it answers.

        Raises:
            UnknownToolCallError: No call ever used ``call_id``.
            DuplicateToolResultError: Every call with ``call_id`` already has its result.
        """
        self.check_answer(call_id)
        return self.pending.pop(call_id)

    def check_answer(self, call_id: str) -> None:
        """Raise the error ``answer`` would raise for ``call_id``; change nothing."""
        if call_id in self.pending:
            return
        if call_id not in self.names:
            raise UnknownToolCallError(self.session_id, call_id)
        raise DuplicateToolResultError(self.session_id, call_id)

    def awaits(self, call_id: str) -> bool:
        """Return whether a call with ``call_id`` awaits its result (a result for it would pair)."""
        return call_id in self.pending

    def was_issued(self, call_id: str) -> bool:
        """Return whether any call (answered or not) used ``call_id``."""
        return call_id in self.names

    def name_of(self, call_id: str) -> str | None:
        """Return the tool name of the latest call with ``call_id``, or None if none was issued."""
        return self.names.get(call_id)

    @property
    def pending_calls(self) -> list[str]:
        """Call ids awaiting a result, in issue order."""
        return list(self.pending)

    def trial(self) -> CallPairing:
        """Return a pairing to try a batch on: changes to it never reach this one.

        Costs O(1), not O(session): the issued names and the pending calls are layered, not copied.
        """
        return CallPairing(self.session_id, ChainMap({}, self.names), _Layer(self.pending))


class _Layer(MutableMapping[str, int]):
    """A mapping over a read-only base: changes are kept aside, so the base is never copied or changed."""

    __slots__ = ("added", "base", "removed")

    def __init__(self, base: Mapping[str, int]) -> None:
        self.base = base
        self.added: dict[str, int] = {}
        self.removed: set[str] = set()

    def __getitem__(self, key: str) -> int:
        if key in self.added:
            return self.added[key]
        if key in self.removed:
            raise KeyError(key)
        return self.base[key]

    def __setitem__(self, key: str, value: int) -> None:
        self.added[key] = value

    def __delitem__(self, key: str) -> None:
        if key not in self:
            raise KeyError(key)
        self.added.pop(key, None)
        if key in self.base:
            self.removed.add(key)

    def __iter__(self) -> Iterator[str]:
        yield from (k for k in self.base if k not in self.removed and k not in self.added)
        yield from self.added

    def __len__(self) -> int:
        return sum(1 for _ in self)


class SessionState:
    """What the rules need to know of a session: its version and its tool calls (``CallPairing``).

    Kept small on purpose (no message bodies), so a cached state catches up by applying only
    the events appended since, instead of replaying the whole session per append.
    """

    __slots__ = ("calls", "session_id", "version")

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.version = 0
        self.calls = CallPairing(session_id)

    @property
    def exists(self) -> bool:
        """True once the session's ``SessionStarted`` is stored."""
        return self.version > 0

    @property
    def pending_calls(self) -> list[str]:
        """Tool call ids issued but not yet answered, in issue order."""
        return self.calls.pending_calls

    def check(self, events: Sequence[AnyEvent]) -> None:
        """Raise a typed ``ValidationError`` if ``events`` may not follow this state; change nothing.

        A started session's batch of ``_UNRULED`` events (plain messages) passes at once: no rule reads
        them past position 1, and the types are compared in C.
        """
        if self.version and _UNRULED.issuperset(map(type, events)):
            return
        self.check_each(events)

    def check_each(self, events: Sequence[AnyEvent]) -> None:
        """The definition of ``check``: every event checked at its position, in order."""
        if len(events) == 1:  # the common append: no later event to carry changes to, so no trial
            self._check_one(events[0], self.version + 1, None)
            return
        version = self.version
        calls = self.calls.trial()
        for event in events:
            version += 1
            self._check_one(event, version, calls)

    def _check_one(self, event: AnyEvent, position: int, calls: CallPairing | None) -> None:
        """Check ``event`` at ``position``; record its calls in ``calls`` (None: check only)."""
        if isinstance(event, SummaryRecorded):
            msg = "summaries are stored in the summary stream, not in the session stream"
            raise InvalidMessageError(msg)
        if isinstance(event, SessionStarted):
            if position > 1:
                raise SessionExistsError(self.session_id)
            if event.session_id != self.session_id:
                msg = f"SessionStarted names {event.session_id!r} inside stream {self.session_id!r}"
                raise InvalidMessageError(msg)
            return
        if position == 1:
            raise SessionNotFoundError(self.session_id)
        if isinstance(event, AssistantMessageAdded | ToolResultRecorded):
            self._check_pairing(event, position, calls)
        elif isinstance(event, ItemPinned | ItemUnpinned) and not 1 <= event.position < position:
            msg = f"position {event.position} is outside session {self.session_id!r} (1..{position - 1})"
            raise InvalidMessageError(msg)

    def _check_pairing(
        self, event: AssistantMessageAdded | ToolResultRecorded, position: int, calls: CallPairing | None
    ) -> None:
        if isinstance(event, ToolResultRecorded):
            if calls is None:
                self.calls.check_answer(event.call_id)
            else:
                calls.answer(event.call_id)
        elif calls is None:
            self.calls.check_issue(call.id for call in event.tool_calls)
        else:
            calls.issue(((call.id, call.name) for call in event.tool_calls), position)

    def to_snapshot(self) -> dict[str, object]:
        """Return the state as plain data (position, issued call names, pending call positions)."""
        return {"version": self.version, "names": dict(self.calls.names), "pending": dict(self.calls.pending)}

    @classmethod
    def from_snapshot(cls, session_id: str, data: dict[str, object]) -> SessionState:
        """Rebuild a state from ``to_snapshot`` data.

        Raises:
            KeyError: The data lacks a field (e.g. a snapshot of the earlier issued/answered form).
            TypeError: A field has the wrong type.
        """
        state = cls(session_id)
        version, names, pending = data["version"], data["names"], data["pending"]
        if not isinstance(version, int) or not isinstance(names, dict) or not isinstance(pending, dict):
            msg = f"rules snapshot of {session_id!r} is malformed"
            raise TypeError(msg)
        if not all(isinstance(p, int) for p in pending.values()):
            msg = f"rules snapshot of {session_id!r} has a non-integer call position"
            raise TypeError(msg)
        state.version = version
        state.calls.names = {str(k): str(v) for k, v in names.items()}
        state.calls.pending = {str(k): int(v) for k, v in pending.items()}
        return state

    def apply_all(self, events: Sequence[AnyEvent]) -> None:
        """``apply`` each of ``events`` in order (a batch of ``_UNRULED`` events only moves the version)."""
        if _UNRULED.issuperset(map(type, events)):
            self.version += len(events)
            return
        for event in events:
            self.apply(event)

    def apply(self, event: AnyEvent) -> None:
        """Advance the state past one stored event (already checked: it cannot break a rule)."""
        self.version += 1
        if isinstance(event, AssistantMessageAdded):
            for call in event.tool_calls:
                self.calls.names[call.id] = call.name
                self.calls.pending[call.id] = self.version
        elif isinstance(event, ToolResultRecorded):
            self.calls.pending.pop(event.call_id, None)
