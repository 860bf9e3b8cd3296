"""Worker processes for the store concurrency tests (run as a script, not collected by pytest).

``append URL SESSION N RETRY DIR WID`` appends N user messages to SESSION, with the optimistic-concurrency
retry of the README when RETRY is 1; ``open URL ROUNDS DIR WID`` opens the ledger once per round. Both
start each round together: they wait for a ``go`` file in DIR, then write their result as JSON.
"""

from __future__ import annotations

import json
import logging
import random
import subprocess
import sys
import time
from pathlib import Path

import contextledger
import structlog


def _publish(path: Path, value: object) -> None:
    """Write a result atomically, so the parent never reads a half-written file."""
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(value))
    partial.replace(path)


def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + 120
    while not path.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"no {path} within 120 s")
        time.sleep(0.001)


def append_with_retry(ledger: contextledger.Ledger, session_id: str, text: str, key: str) -> int:
    """The README recipe: on a conflict reload (the ledger catches up by itself) and try again."""
    conflicts = 0
    while True:
        try:
            ledger.add_user_message(session_id, text, idempotency_key=key)
        except contextledger.ConcurrencyConflictError:
            conflicts += 1
            time.sleep(random.uniform(0, 0.002 * min(conflicts, 10)))  # jittered backoff
        else:
            return conflicts


def append(url: str, session_id: str, count: int, *, retry: bool, folder: Path, wid: str) -> None:
    """Append ``count`` messages; count outcomes by kind."""
    outcome = {"ok": 0, "conflicts": 0, "locked": 0, "unavailable": 0, "other": []}
    with contextledger.open_ledger(url) as ledger:
        (folder / f"ready-{wid}").touch()
        _wait_for(folder / "go")
        for n in range(count):
            text, key = f"{wid}-{n}", f"{wid}-{n}"
            try:
                if retry:
                    outcome["conflicts"] += append_with_retry(ledger, session_id, text, key)
                else:
                    ledger.add_user_message(session_id, text, idempotency_key=key)
                outcome["ok"] += 1
            except contextledger.ConcurrencyConflictError:
                outcome["conflicts"] += 1
            except contextledger.StoreUnavailableError as error:
                outcome["locked" if "locked" in str(error) else "unavailable"] += 1
            except Exception as error:  # noqa: BLE001 - every other failure is reported to the test
                outcome["other"].append(f"{type(error).__name__}: {error}")
    _publish(folder / f"result-{wid}.json", outcome)


def open_rounds(url: str, rounds: int, folder: Path, wid: str) -> None:
    """Open and close the ledger once per round, all workers at once; record each failure."""
    (folder / f"ready-{wid}").touch()
    for r in range(rounds):
        _wait_for(folder / f"go-{r}")
        try:
            contextledger.open_ledger(url.replace("{round}", str(r))).close()
            result = "ok"
        except Exception as error:  # noqa: BLE001 - reported to the test
            result = f"{type(error).__name__}: {error}"
        _publish(folder / f"result-{r}-{wid}.json", result)


def open_concurrently(url_pattern: str, rounds: int, folder: Path) -> list[str]:
    """Parent side: four processes open the ledger at once, ``rounds`` times; return every failure."""
    procs = [
        subprocess.Popen([sys.executable, __file__, "open", url_pattern, str(rounds), str(folder), str(w)])
        for w in range(4)
    ]
    failures: list[str] = []
    try:
        deadline = time.monotonic() + 600
        while len(list(folder.glob("ready-*"))) < 4:
            assert all(p.poll() is None for p in procs), "an opener died before starting"
            assert time.monotonic() < deadline
            time.sleep(0.01)
        for r in range(rounds):
            (folder / f"go-{r}").touch()
            results = [folder / f"result-{r}-{w}.json" for w in range(4)]
            while not all(p.exists() for p in results):
                assert all(p.poll() in {None, 0} for p in procs), "an opener crashed"
                assert time.monotonic() < deadline
                time.sleep(0.01)
            outcomes = [json.loads(p.read_text()) for p in results]
            failures += [f"round {r}: {o}" for o in outcomes if o != "ok"]
    finally:
        for proc in procs:
            proc.wait(timeout=60)
    return failures


if __name__ == "__main__":
    # Conflicts are counted, not logged line by line (only in the worker process, never in pytest's).
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    command, args = sys.argv[1], sys.argv[2:]
    if command == "append":
        append(args[0], args[1], int(args[2]), retry=args[3] == "1", folder=Path(args[4]), wid=args[5])
    else:
        open_rounds(args[0], int(args[1]), Path(args[2]), args[3])
