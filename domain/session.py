"""The rules of a session stream: what may be appended given what is already there."""

from __future__ import annotations

from collections.abc import Sequence

from contextledger.domain.errors import (
    DuplicateToolCallError,
    DuplicateToolResultError,
    InvalidMessageError,
    SessionExistsError,
    SessionNotFoundError,
    UnknownToolCallError,
)
from contextledger.domain.events import (
    AnyEvent,
    AssistantMessageAdded,
    ItemPinned,
    ItemUnpinned,
    SessionStarted,
    SummaryRecorded,
    ToolResultRecorded,
)

__all__ = ["SessionState"]


class SessionState:
    """What the rules need to know of a session: its version and its tool calls.

    Kept small on purpose (no message bodies), so a cached state catches up by applying only
    the events appended since, instead of replaying the whole session per append.
    """

    __slots__ = ("answered", "issued", "session_id", "version")

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.version = 0
        self.issued: dict[str, str] = {}
        self.answered: set[str] = set()

    @property
    def exists(self) -> bool:
        """True once the session's ``SessionStarted`` is stored."""
        return self.version > 0

    @property
    def pending_calls(self) -> list[str]:
        """Tool call ids issued but not yet answered, in issue order."""
        return [call_id for call_id in self.issued if call_id not in self.answered]

    def check(self, events: Sequence[AnyEvent]) -> None:
        """Raise a typed ``ValidationError`` if ``events`` may not follow this state; change nothing."""
        version = self.version
        issued: dict[str, str] = {}
        answered: set[str] = set()
        for event in events:
            self._check_one(event, version, issued, answered)
            version += 1
            if isinstance(event, AssistantMessageAdded):
                issued.update({call.id: call.name for call in event.tool_calls})
            elif isinstance(event, ToolResultRecorded):
                answered.add(event.call_id)

    def _check_one(
        self,
        event: AnyEvent,
        version: int,
        new_issued: dict[str, str],
        new_answered: set[str],
    ) -> None:
        if isinstance(event, SummaryRecorded):
            msg = "summaries are stored in the summary stream, not in the session stream"
            raise InvalidMessageError(msg)
        if isinstance(event, SessionStarted):
            if version > 0:
                raise SessionExistsError(self.session_id)
            if event.session_id != self.session_id:
                msg = f"SessionStarted names {event.session_id!r} inside stream {self.session_id!r}"
                raise InvalidMessageError(msg)
            return
        if version == 0:
            raise SessionNotFoundError(self.session_id)
        if isinstance(event, AssistantMessageAdded):
            self._check_calls(event, new_issued)
        elif isinstance(event, ToolResultRecorded):
            self._check_result(event, new_issued, new_answered)
        elif isinstance(event, ItemPinned | ItemUnpinned) and not 1 <= event.position <= version:
            msg = f"position {event.position} is outside session {self.session_id!r} (1..{version})"
            raise InvalidMessageError(msg)

    def _check_calls(self, event: AssistantMessageAdded, new_issued: dict[str, str]) -> None:
        seen: set[str] = set()
        for call in event.tool_calls:
            if call.id in self.issued or call.id in new_issued or call.id in seen:
                raise DuplicateToolCallError(self.session_id, call.id)
            seen.add(call.id)

    def _check_result(
        self, event: ToolResultRecorded, new_issued: dict[str, str], new_answered: set[str]
    ) -> None:
        if event.call_id not in self.issued and event.call_id not in new_issued:
            raise UnknownToolCallError(self.session_id, event.call_id)
        if event.call_id in self.answered or event.call_id in new_answered:
            raise DuplicateToolResultError(self.session_id, event.call_id)

    def to_snapshot(self) -> dict[str, object]:
        """Return the state as plain data (position, issued calls, answered calls)."""
        return {"version": self.version, "issued": dict(self.issued), "answered": sorted(self.answered)}

    @classmethod
    def from_snapshot(cls, session_id: str, data: dict[str, object]) -> SessionState:
        """Rebuild a state from ``to_snapshot`` data."""
        state = cls(session_id)
        version, issued, answered = data["version"], data["issued"], data["answered"]
        if not isinstance(version, int) or not isinstance(issued, dict) or not isinstance(answered, list):
            msg = f"rules snapshot of {session_id!r} is malformed"
            raise TypeError(msg)
        state.version = version
        state.issued = {str(k): str(v) for k, v in issued.items()}
        state.answered = {str(a) for a in answered}
        return state

    def apply(self, event: AnyEvent) -> None:
        """Advance the state past one stored event."""
        self.version += 1
        if isinstance(event, AssistantMessageAdded):
            for call in event.tool_calls:
                self.issued[call.id] = call.name
        elif isinstance(event, ToolResultRecorded):
            self.answered.add(event.call_id)
