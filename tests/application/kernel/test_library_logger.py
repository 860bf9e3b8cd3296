"""Library loggers: structlog loads only when a record is written; what is written is unchanged."""

from __future__ import annotations

import json
import subprocess
import sys

_HOST = r"""
import json, logging, sys
from contextledger.application.kernel.logs import STRUCTLOG_KEY, get_logger

seen = []
class Keep(logging.Handler):
    def emit(self, record):
        seen.append([record.levelname, record.getMessage(), dict(getattr(record, STRUCTLOG_KEY, {}))])

log = get_logger("contextledger.test")
log.info("ignored", n=1)
log.debug("ignored too", n=2)
before = "structlog" in sys.modules
root = logging.getLogger("contextledger")
root.addHandler(Keep())
root.setLevel(logging.INFO)
log.debug("below the level", n=3)
log.info("written", n=4)
try:
    raise ValueError("boom")
except ValueError:
    log.exception("failed", n=5)
print(json.dumps({"before": before, "after": "structlog" in sys.modules, "seen": seen}))
"""


def test_structlog_loads_only_when_a_record_is_written():
    """Calls below the effective level (WARNING by default) load no structlog; enabled ones write records."""
    done = subprocess.run([sys.executable, "-c", _HOST], capture_output=True, text=True, check=True)
    out = json.loads(done.stdout)
    assert out["before"] is False
    assert out["after"] is True
    assert out["seen"] == [
        ["INFO", "written n=4", {"n": 4, "event": "written"}],
        ["ERROR", "failed n=5 exc_info=True", {"n": 5, "exc_info": True, "event": "failed"}],
    ]
    assert done.stderr == ""  # the records above are those the eager structlog logger wrote (same host)
