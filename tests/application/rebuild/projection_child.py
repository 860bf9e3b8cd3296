"""A rebuild run in a child process, so a test can kill -9 it between batches (argv: url, log file)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import contextledger
from contextledger.adapters.store.projections import RecorderProjections
from contextledger.application.rebuild.projection_runner import BatchDone, ProjectionRunner


def main() -> None:
    """Rebuild the default context projection in batches of 50, logging each committed tracking position."""
    url, log_file = sys.argv[1], Path(sys.argv[2])
    with contextledger.open_ledger(url) as ledger, log_file.open("a") as log:
        views = RecorderProjections(ledger.ports.log)  # type: ignore[arg-type]

        def committed(done: BatchDone) -> None:
            log.write(f"{done.first_id} {done.tracking}\n")
            log.flush()
            time.sleep(0.05)

        ProjectionRunner(ledger, views, views, batch_size=50, on_batch=committed).run()


if __name__ == "__main__":
    main()
