"""Library loggers: structlog's API over the standard ``logging`` tree, silent until the host sets it up."""

from __future__ import annotations

import logging
from collections.abc import Mapping, MutableMapping
from typing import Any

import structlog

__all__ = ["ROOT_LOGGER", "STRUCTLOG_KEY", "get_logger"]

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


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    """Return a structlog logger writing to the standard logger ``name`` (no global structlog setup).

    A level the host's logging does not enable costs one ``isEnabledFor`` check; nothing is printed
    unless the host (or the CLI) attaches a handler.
    """
    logger: structlog.stdlib.BoundLogger = structlog.wrap_logger(
        logging.getLogger(name),
        processors=[structlog.stdlib.filter_by_level, structlog.contextvars.merge_contextvars, _to_stdlib],
        wrapper_class=structlog.stdlib.BoundLogger,
        context_class=dict,
        cache_logger_on_first_use=True,
    )
    return logger
