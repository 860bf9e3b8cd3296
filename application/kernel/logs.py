"""Library loggers: structlog's API over the standard ``logging`` tree, silent until the host sets it up."""

from __future__ import annotations

import logging
from collections.abc import Mapping, MutableMapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import structlog

__all__ = ["ROOT_LOGGER", "STRUCTLOG_KEY", "LibraryLogger", "get_logger"]

ROOT_LOGGER = "contextledger"
"""The standard logger every library logger descends from; a host routes or silences it by this name."""

STRUCTLOG_KEY = "structlog"
"""Attribute of a ``logging.LogRecord`` holding the event's key-value pairs (for JSON renderers)."""

logging.getLogger(ROOT_LOGGER).addHandler(logging.NullHandler())
# A library adds only a NullHandler (the logging HOWTO's rule): with no handler of the host's own,
# Python's last-resort handler would print warnings on stderr.


def _to_stdlib(
    _: Any, __: str, event_dict: MutableMapping[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Render the event as one ``event key=value ...`` message; keep the pairs on the record too."""
    pairs: Mapping[str, Any] = dict(event_dict)
    event = str(pairs.get("event", ""))
    rest = " ".join(f"{key}={value!r}" for key, value in pairs.items() if key != "event")
    message = f"{event} {rest}" if rest else event
    return (message,), {"extra": {STRUCTLOG_KEY: pairs}}


class LibraryLogger:
    """A structlog logger writing to the standard logger ``name``, made on the first call its level enables.

    A call at a level the host's logging does not enable costs one ``isEnabledFor`` check, and
    structlog (whose import loads ``rich``'s tracebacks, ~0.08 s of every CLI start) is imported
    only when a record is actually written.
    """

    __slots__ = ("_bound", "_std")

    def __init__(self, name: str) -> None:
        """Log to the standard logger ``name``."""
        self._std = logging.getLogger(name)
        self._bound: structlog.stdlib.BoundLogger | None = None

    def _logger(self) -> structlog.stdlib.BoundLogger:
        if self._bound is None:
            import structlog  # noqa: PLC0415 - only once a record is written

            self._bound = structlog.wrap_logger(
                self._std,
                processors=[
                    structlog.stdlib.filter_by_level,
                    structlog.contextvars.merge_contextvars,
                    _to_stdlib,
                ],
                wrapper_class=structlog.stdlib.BoundLogger,
                context_class=dict,
                cache_logger_on_first_use=True,
            )
        return self._bound

    def _write(self, level: int, method: str, event: str, pairs: dict[str, Any]) -> None:
        if self._std.isEnabledFor(level):
            getattr(self._logger(), method)(event, **pairs)

    def debug(self, event: str, **pairs: Any) -> None:
        """Log ``event`` with ``pairs`` at DEBUG."""
        self._write(logging.DEBUG, "debug", event, pairs)

    def info(self, event: str, **pairs: Any) -> None:
        """Log ``event`` with ``pairs`` at INFO."""
        self._write(logging.INFO, "info", event, pairs)

    def warning(self, event: str, **pairs: Any) -> None:
        """Log ``event`` with ``pairs`` at WARNING."""
        self._write(logging.WARNING, "warning", event, pairs)

    def error(self, event: str, **pairs: Any) -> None:
        """Log ``event`` with ``pairs`` at ERROR."""
        self._write(logging.ERROR, "error", event, pairs)

    def exception(self, event: str, **pairs: Any) -> None:
        """Log ``event`` with ``pairs`` at ERROR, with the exception being handled."""
        self._write(logging.ERROR, "exception", event, pairs)


def get_logger(name: str) -> LibraryLogger:
    """Return the library logger writing to the standard logger ``name`` (no global structlog setup).

    Nothing is printed unless the host (or the CLI) attaches a handler.
    """
    return LibraryLogger(name)
