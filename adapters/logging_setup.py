"""The CLI's log rendering: a handler on the library's standard logger, text or JSON lines on stderr."""

from __future__ import annotations

import json as jsonlib
import logging
import sys
from datetime import UTC, datetime
from typing import TextIO

from contextledger.application.kernel.logs import ROOT_LOGGER, STRUCTLOG_KEY

__all__ = ["configure_logging"]


class _Formatter(logging.Formatter):
    """One line per record: the event and its key-value pairs, as console text or a JSON object."""

    def __init__(self, *, json: bool) -> None:
        super().__init__()
        self.json = json

    def format(self, record: logging.LogRecord) -> str:
        at = datetime.fromtimestamp(record.created, UTC).isoformat()
        pairs = getattr(record, STRUCTLOG_KEY, None)
        if not self.json:
            return f"{at} [{record.levelname.lower():<7}] {record.getMessage()}"
        fields = dict(pairs) if isinstance(pairs, dict) else {"event": record.getMessage()}
        fields.update(level=record.levelname.lower(), timestamp=at, logger=record.name)
        return jsonlib.dumps(fields, default=str, ensure_ascii=False)


class _CliHandler(logging.StreamHandler[TextIO]):
    """The handler the CLI attaches (replaced when a second command configures logging).

    It writes to the ``sys.stderr`` of the moment, so a command run in-process under a redirected
    stderr logs there.
    """

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


def configure_logging(*, level: str = "WARNING", json: bool = False) -> None:
    """Send the library's logs (the ``contextledger`` logger tree) to stderr at ``level``, one line each.

    Only the CLI calls this: the library itself attaches no handler, so as a library it prints nothing.
    """
    logger = logging.getLogger(ROOT_LOGGER)
    for handler in [h for h in logger.handlers if isinstance(h, _CliHandler)]:
        logger.removeHandler(handler)
    handler = _CliHandler(sys.stderr)
    handler.setFormatter(_Formatter(json=json))
    logger.addHandler(handler)
    logger.setLevel(logging.getLevelName(level.upper()))
