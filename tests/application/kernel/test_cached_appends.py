"""Appends after a cached state equal appends after the state read from the store (ADR 0035).

Two ledgers write one SQLite file in turns, each keeping its own (often stale) cache; the stored events
and every append's outcome must equal those of one ledger that reads the state before each append.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import contextledger
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

Op = tuple[int, str, int]
"""(writer 0 or 1, kind, a number naming the call or text)."""

OPS = st.lists(
    st.tuples(st.integers(0, 1), st.sampled_from(["user", "call", "result", "stale"]), st.integers(0, 2)),
    max_size=14,
)


def _apply(ledger: contextledger.Ledger, session: str, kind: str, n: int) -> Any:
    """One operation; its outcome (positions) or the name of the error it raised."""
    try:
        if kind == "user":
            return ledger.add_user_message(session, f"text {n}")
        if kind == "call":
            return ledger.add_assistant_message(
                session, tool_calls=[{"id": f"c{n}", "name": "f", "arguments": {}}]
            )
        if kind == "result":
            return ledger.add_tool_result(session, f"c{n}", "done")
        return ledger.add_user_message(session, "pinned", expected_version=n + 1)
    except contextledger.ContextLedgerError as error:
        return type(error).__name__


def _stored(ledger: contextledger.Ledger, session: str) -> list[tuple[str, dict[str, Any]]]:
    """The stored events without their times: type and fields."""
    return [
        (type(r.event).__name__, {f: getattr(r.event, f) for f in r.event.__struct_fields__ if f != "at"})
        for r in ledger.events(session)
    ]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS)
def test_two_caching_writers_store_what_one_reading_writer_stores(ops: list[Op]) -> None:
    """Every outcome and the stored session equal a single ledger's, whichever cache was stale."""
    with tempfile.TemporaryDirectory() as folder:
        shared = f"sqlite:///{Path(folder) / 'two.db'}"
        alone = f"sqlite:///{Path(folder) / 'one.db'}"
        with (
            contextledger.open_ledger(shared) as a,
            contextledger.open_ledger(shared) as b,
            contextledger.open_ledger(alone) as one,
        ):
            session = a.start_session(session_id="s")
            one.start_session(session_id="s")
            writers = (a, b)
            for writer, kind, n in ops:
                expected = _apply(one, session, kind, n)
                one._rules._states.clear()
                assert _apply(writers[writer], session, kind, n) == expected
            assert _stored(a, session) == _stored(one, session)
