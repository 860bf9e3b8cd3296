"""What the services beside the ledger (pins, forks, caller-recorded summaries) need of it, as a port."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, TypedDict, Unpack

from contextledger.application.kernel.messages import AssistantMessage, ToolResult, ToolSchemaIn, UserMessage
from contextledger.domain.content import Text
from contextledger.domain.events import AnyEvent, Recorded, SummaryRecorded
from contextledger.domain.ports import Clock, EventLog, IdSource

__all__ = ["MessageLike", "SessionLedger", "SessionSpec", "check_keywords"]

MessageLike = UserMessage | AssistantMessage | ToolResult | dict[str, Any]
"""A message as ``append`` and ``start_session`` take it: parsed, or a provider-shaped mapping."""


class SessionSpec(TypedDict, total=False):
    """The keyword arguments that start a session: the one list ``start_session`` and ``start_sessions`` take.

    ``session_id`` (default: derived from ``idempotency_key``, else a new id), ``system_prompt``
    (default ``""``), ``model``, ``tools`` (schemas or mappings), ``metadata``, ``parent``
    (``(session id, position)`` of a fork), ``messages`` (the first messages, stored atomically),
    ``at`` (default: the clock's now; with ``unknown_time`` and no ``at``, none: a source that recorded
    no start time is not stamped with the clock's) and ``idempotency_key`` (a retried start is a no-op).
    """

    session_id: str | None
    system_prompt: str
    model: str | None
    tools: Iterable[ToolSchemaIn | Mapping[str, Any]]
    metadata: Mapping[str, Any] | None
    parent: tuple[str, int] | None
    messages: Sequence[MessageLike]
    at: datetime | None
    unknown_time: bool
    idempotency_key: str | None


def check_keywords(what: str, given: Mapping[str, object], spec: type[Any]) -> None:
    """Refuse keywords a ``TypedDict`` spec does not declare, or miss, as Python refuses a bad call."""
    declared: frozenset[str] = spec.__required_keys__ | spec.__optional_keys__
    unknown = sorted(set(given) - declared)
    if unknown:
        raise TypeError(f"{what}() got unexpected keyword arguments {unknown}")
    missing = sorted(spec.__required_keys__ - set(given))
    if missing:
        raise TypeError(f"{what}() missing required keyword arguments {missing}")


class SessionLedger(Protocol):
    """The append-and-read side of ``Ledger`` that pins, forks and ``record_summary`` are written against.

    They take this port instead of importing ``Ledger``, so the ledger can delegate to them without an
    import cycle; ``Ledger`` implements it.
    """

    @property
    def log(self) -> EventLog:
        """The event log (a fork reads as its parent's prefix then its own events)."""
        ...

    @property
    def clock(self) -> Clock:
        """The clock events are stamped with."""
        ...

    @property
    def ids(self) -> IdSource:
        """Where new ids come from."""
        ...

    def version(self, session_id: str) -> int:
        """Return the position of the session's last event; raise if the session does not exist."""
        ...

    def events(self, session_id: str, *, after: int = 0, upto: int | None = None) -> list[Recorded]:
        """Return the session's events with positions in ``(after, upto]``."""
        ...

    def summaries(self, session_id: str) -> list[SummaryRecorded]:
        """Return the summary artifacts stored for a session, oldest first."""
        ...

    def stored_text(self, text: str, blobs: dict[str, str]) -> Text:
        """Return ``text`` as an event stores it: inline, or a blob reference whose blob joins ``blobs``."""
        ...

    def start_session(self, **spec: Unpack[SessionSpec]) -> str:
        """Start a session (the keywords of ``SessionSpec``) and return its id."""
        ...

    def append_built(
        self, session_id: str, build: Callable[[], Sequence[AnyEvent]], **options: Any
    ) -> tuple[int, ...]:
        """Build events under the ledger's write lock, check and append them in one transaction.

        Returns their positions (those of the first append when ``idempotency_key`` replays one);
        an empty build appends nothing and returns ``()``.
        """
        ...
