"""Ledger behaviour under threads, retries, odd values and failing derived writes."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import contextledger
import msgspec
import pytest
from contextledger.application.kernel.rules_cache import RULES_SNAPSHOT_EVERY


def test_threads_sharing_a_ledger_never_leave_gaps(tmp_path):
    """Concurrent appends through one Ledger give contiguous positions and lose no message."""
    with contextledger.open_ledger(f"sqlite:///{tmp_path / 't.db'}") as ledger:
        session = ledger.start_session()

        def writer(n: int) -> None:
            for i in range(50):
                ledger.add_user_message(session, f"w{n}-{i}")

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert [r.position for r in ledger.events(session)] == list(range(1, 202))


def test_a_wellformed_but_wrong_rules_snapshot_is_ignored(tmp_path):
    """A snapshot claiming a position the stream never reached cannot move appends past the head."""
    url = f"sqlite:///{tmp_path / 'r.db'}"
    with contextledger.open_ledger(url) as ledger:
        session = ledger.start_session()
        ledger.append_many(session, [{"role": "user", "content": "x"}] * RULES_SNAPSHOT_EVERY)
        forged = {"version": 5000, "issued": {}, "answered": []}
        ledger.ports.snapshots.save_snapshot(f"rules/v2/{session}", 5000, msgspec.msgpack.encode(forged))
    with contextledger.open_ledger(url) as ledger:
        position = ledger.add_user_message(session, "next")
        assert position == RULES_SNAPSHOT_EVERY + 2
        assert ledger.events(session)[-1].position == position


def test_a_retried_start_without_session_id_returns_the_same_session(ledger):
    """With only an idempotency key, the retry finds the first session instead of starting another."""
    first = ledger.start_session(system_prompt="s", idempotency_key="create-1")
    second = ledger.start_session(system_prompt="s", idempotency_key="create-1")
    assert first == second
    assert len(ledger.sessions()) == 1


def test_a_retried_batch_start_stores_nothing_new(ledger):
    """start_sessions with the same keys again is a no-op returning the same ids."""
    specs = [{"session_id": "a", "idempotency_key": "ka"}, {"idempotency_key": "kb"}]
    first = ledger.start_sessions(specs)
    assert ledger.start_sessions(specs) == first
    assert sorted(s.session_id for s in ledger.sessions()) == sorted(first)


def test_a_failing_snapshot_write_does_not_fail_the_append(tmp_path, monkeypatch):
    """Snapshots are derived: when saving one fails, the committed append still succeeds once."""
    with contextledger.open_ledger(f"sqlite:///{tmp_path / 's.db'}") as ledger:
        session = ledger.start_session()

        def broken(*_args):
            raise contextledger.StoreUnavailableError("disk full")

        monkeypatch.setattr(ledger.ports.snapshots, "save_snapshot", broken)
        ledger.append_many(session, [{"role": "user", "content": "x"}] * (RULES_SNAPSHOT_EVERY - 1))
        position = ledger.add_user_message(session, "the one that crosses the snapshot mark")
        assert position == RULES_SNAPSHOT_EVERY + 1 == ledger.version(session)


@pytest.mark.parametrize(
    "message",
    [
        {
            "role": "assistant",
            "tool_calls": [{"id": "c", "name": "t", "arguments": {"when": datetime.now(UTC)}}],
        },
        {"role": "assistant", "tool_calls": [{"id": "c", "name": "t", "arguments": {"x": float("nan")}}]},
        {"role": "user", "content": "hi", "meta": {"o": object()}},
        {"role": "user", "content": "broken \ud800 surrogate"},
    ],
    ids=["datetime-argument", "nan-argument", "object-in-meta", "lone-surrogate"],
)
def test_values_that_cannot_be_stored_are_typed_errors(ledger, message):
    """Unstorable values raise InvalidMessageError from the package tree and write nothing."""
    session = ledger.start_session()
    with pytest.raises(contextledger.InvalidMessageError):
        ledger.append(session, message)
    assert ledger.version(session) == 1
