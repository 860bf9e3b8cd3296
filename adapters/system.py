"""The machine's clock and id source, behind the core's ``Clock`` and ``IdSource`` ports."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

__all__ = ["SystemClock", "UuidSource"]


class SystemClock:
    """The wall clock, in UTC."""

    def now(self) -> datetime:
        """Return the current UTC time."""
        return datetime.now(UTC)


class UuidSource:
    """Random UUID4 ids, as hex strings."""

    def new_id(self) -> str:
        """Return a fresh random id."""
        return uuid.uuid4().hex
