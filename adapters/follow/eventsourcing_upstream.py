"""The ``UpstreamLog`` port on an ``eventsourcing`` application's notification log (any database)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from contextledger.application.agent.follower import UpstreamNotification
from contextledger.domain.errors import EventDecodeError
from eventsourcing.application import Application
from eventsourcing.utils import TopicError

__all__ = ["EventsourcingUpstream"]


class EventsourcingUpstream:
    """Read an ``eventsourcing.application.Application``'s notification log for a ``Follower``.

    The application may live in the ledger's database or another one: construct it as its own code
    does (its environment names the persistence module), and hand it here; the follower only reads.

    Args:
        app: The upstream application (its ``notification_log`` and ``mapper`` are used).
        name: A stable name for the upstream (default: the application's ``name``).
    """

    def __init__(self, app: Application[Any], *, name: str | None = None) -> None:
        self.app = app
        self._name = name or app.name

    @property
    def name(self) -> str:
        """The upstream's stable name."""
        return self._name

    def read(self, after: int, limit: int) -> Sequence[UpstreamNotification]:
        """Return at most ``limit`` notifications after id ``after``, decoded to domain events.

        An event whose class this process cannot import comes with ``event=None`` (skipped and
        reported by the follower); any other decoding failure raises ``EventDecodeError``.
        """
        section = min(limit, self.app.notification_log.section_size)
        notifications = self.app.notification_log.select(start=after + 1, limit=section)
        out: list[UpstreamNotification] = []
        for notification in notifications:
            try:
                event = self.app.mapper.to_domain_event(notification)
            except TopicError:
                event = None  # a type this process cannot import: the follower skips and reports it
            except Exception as error:
                msg = f"upstream {self._name!r}: notification {notification.id} cannot be decoded: {error}"
                raise EventDecodeError(msg) from error
            out.append(
                UpstreamNotification(
                    notification_id=notification.id,
                    type_name=notification.topic,
                    stream_id=str(notification.originator_id),
                    event=event,
                )
            )
        return out
