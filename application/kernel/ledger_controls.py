"""Ledger writes beside messages: pins and their restore, forks, and summaries recorded by a caller."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, cast

from contextledger.application.kernel.drafting import EventDrafter
from contextledger.application.kernel.summary_log import SummaryStream
from contextledger.domain.errors import InvalidMessageError
from contextledger.domain.events import AnyEvent, ItemPinned, ItemUnpinned, SummaryRecorded
from contextledger.domain.ports import AppendOutcome, Clock, EventLog, IdSource
from contextledger.domain.session import SessionState

if TYPE_CHECKING:
    from contextledger.application.kernel.ledger import Ledger

__all__ = ["LedgerControls"]


class LedgerControls:
    """Pins, forks and caller-recorded summaries of ``Ledger`` (which supplies the state these use)."""

    if TYPE_CHECKING:
        _lock: threading.RLock
        _drafts: EventDrafter
        log: EventLog
        ids: IdSource
        clock: Clock

        def version(self, session_id: str) -> int:
            """The position of the session's last event."""

        def _append_events(self, session_id: str, events: list[AnyEvent], **options: Any) -> int: ...

        def _append(
            self,
            session_id: str,
            events: list[AnyEvent],
            blobs: dict[str, str],
            *,
            expected_version: int | None = None,
            idempotency_key: str | None = None,
            state: SessionState | None = None,
        ) -> AppendOutcome: ...

    def _as_ledger(self) -> Ledger:
        """This object as the ``Ledger`` it always is (the services below take a ledger)."""
        return cast("Ledger", self)

    def pin(self, session_id: str, position: int, reason: str = "", **options: Any) -> int:
        """Pin the event at ``position``: the next render shows it verbatim and no reducer evicts it.

        A stubbed, truncated, dropped or summarized event comes back (within the budget: if the pinned
        items cannot fit, rendering raises ``PinnedOverBudgetError``). The pin carries the events of the
        pinned step group (``meta["restore"]``), so a render can re-admit a group it dropped. Returns
        the pin's position; ``unpin`` reverses it.
        """
        from contextledger.application.kernel.pins import pin_meta  # noqa: PLC0415 - pins reads through Ledger

        event = ItemPinned(
            position=position, reason=reason, meta=pin_meta(self._as_ledger(), session_id, position)
        )
        return self._append_events(session_id, [event], **options)

    def unpin(self, session_id: str, position: int, **options: Any) -> int:
        """Lift a pin; return the position of the unpin event."""
        return self._append_events(session_id, [ItemUnpinned(position=position)], **options)

    def pin_span(
        self, session_id: str, first: int, last: int, reason: str = "", **options: Any
    ) -> tuple[int, ...]:
        """Pin every message of ``first..last`` in one transaction (e.g. undo a compaction); return the pins.

        Each comes back verbatim in the next render, as with ``pin``; ``unpin_span`` reverses it.
        """
        from contextledger.application.kernel.pins import span_pins  # noqa: PLC0415 - pins reads through Ledger

        with self._lock:
            events = span_pins(self._as_ledger(), session_id, first, last, reason)
            return self._append(session_id, events, {}, **options).positions if events else ()

    def unpin_span(self, session_id: str, first: int, last: int, **options: Any) -> tuple[int, ...]:
        """Lift the pins of every message of ``first..last`` in one transaction; return the unpins."""
        from contextledger.application.kernel.pins import span_unpins  # noqa: PLC0415 - pins reads through Ledger

        with self._lock:
            events = span_unpins(self._as_ledger(), session_id, first, last)
            return self._append(session_id, events, {}, **options).positions if events else ()

    def fork(self, session_id: str, at: int, *, from_summary: bool = False, **options: Any) -> str:
        """Start a session continuing ``session_id`` after position ``at`` (nothing copied); return its id.

        See ``contextledger.application.fork.fork_session`` (``new_session_id=``, ``metadata=``).
        """
        from contextledger.application.kernel.fork import fork_session  # noqa: PLC0415 - fork imports Ledger

        return fork_session(self._as_ledger(), session_id, at, from_summary=from_summary, **options)

    def record_summary(
        self,
        session_id: str,
        *,
        covers_from: int,
        covers_through: int,
        text: str,
        produced_at: int | None = None,
        model: str | None = None,
        prompt_sha: str | None = None,
        config_sha: str | None = None,
    ) -> SummaryRecorded:
        """Store a summary artifact of positions ``covers_from..covers_through`` in the summary stream.

        The artifact applies to renders at positions from ``produced_at`` on; the default is the next
        position (head + 1), so no render already made at an existing position can change. A past
        ``produced_at`` is for backfills: renders at positions from it on change.
        """
        head = self.version(session_id)
        produced = head + 1 if produced_at is None else produced_at
        if not 1 <= covers_from <= covers_through <= produced <= head + 1:
            msg = (
                f"a summary must cover 1 <= from <= through <= produced_at <= {head + 1}; "
                f"got {covers_from}..{covers_through} produced at {produced}"
            )
            raise InvalidMessageError(msg)
        blobs: dict[str, str] = {}
        event = SummaryRecorded(
            summary_id=self.ids.new_id(),
            session_id=session_id,
            covers_from=covers_from,
            covers_through=covers_through,
            content=self._drafts.text(text, blobs),
            produced_at=produced,
            model=model,
            prompt_sha=prompt_sha,
            config_sha=config_sha,
            producer="api",
            at=self.clock.now(),
        )
        SummaryStream(self.log, session_id).append(event, blobs=blobs)
        return event
