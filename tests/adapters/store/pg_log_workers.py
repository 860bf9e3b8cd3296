"""A writer process for the concurrent-log tests (run as a script, not collected by pytest).

``write URL SESSION WID COUNT DIR``: appends the user messages ``WID-0`` .. ``WID-(COUNT-1)`` to SESSION,
each under the idempotency key of its text, and records each one in ``DIR/ack-WID`` only after its
append returned (an acknowledged write). A restarted writer (after a ``kill -9``) resumes at the first
message it has no acknowledgement for: if that append had landed before the kill, it is replayed, not
stored twice.
"""

from __future__ import annotations

import sys
from pathlib import Path

import contextledger


def write(url: str, session_id: str, wid: str, count: int, folder: Path) -> None:
    """Append the messages not yet acknowledged, acknowledging each after its append returns."""
    acks = folder / f"ack-{wid}"
    done = len(acks.read_text().split()) if acks.exists() else 0
    with contextledger.open_ledger(url) as ledger, acks.open("a") as out:
        for n in range(done, count):
            text = f"{wid}-{n}"
            ledger.add_user_message(session_id, text, idempotency_key=text)
            out.write(f"{n}\n")
            out.flush()


if __name__ == "__main__":
    _, command, url, session_id, wid, count, folder = sys.argv
    assert command == "write"
    write(url, session_id, wid, int(count), Path(folder))
