"""The ledger's rules state: a fresh process starts from its snapshot and still enforces every rule."""

from __future__ import annotations

import contextledger
import pytest
from contextledger.application.kernel.rules_cache import RULES_SNAPSHOT_EVERY


def _long_session(ledger: contextledger.Ledger) -> str:
    session = ledger.start_session()
    messages: list[dict] = []
    for i in range(RULES_SNAPSHOT_EVERY // 2 + 1):
        messages.append({"role": "assistant", "tool_calls": [{"id": f"c{i}", "name": "run"}]})
        messages.append({"role": "tool", "call_id": f"c{i}", "content": "ok"})
    ledger.append_many(session, messages)
    ledger.add_assistant_message(session, tool_calls=[{"id": "open", "name": "run"}])
    return session


def test_a_fresh_ledger_reads_only_events_after_the_rules_snapshot(tmp_path, monkeypatch):
    """After a snapshot, the first append from a new process reads no event before it."""
    url = f"sqlite:///{tmp_path / 'r.db'}"
    with contextledger.open_ledger(url) as ledger:
        session = _long_session(ledger)
    with contextledger.open_ledger(url) as ledger:
        reads: list[int] = []
        original = ledger.log.read

        def counting_read(stream_id, *, after=0, upto=None):
            reads.append(after)
            return original(stream_id, after=after, upto=upto)

        monkeypatch.setattr(ledger.log, "read", counting_read)
        ledger.add_tool_result(session, "open", "done")
        assert min(reads) >= RULES_SNAPSHOT_EVERY


def test_rules_survive_the_snapshot(tmp_path):
    """Calls answered before the snapshot stay answered; unknown calls stay unknown."""
    url = f"sqlite:///{tmp_path / 'r.db'}"
    with contextledger.open_ledger(url) as ledger:
        session = _long_session(ledger)
    with contextledger.open_ledger(url) as ledger:
        with pytest.raises(contextledger.DuplicateToolResultError):
            ledger.add_tool_result(session, "c3", "again")
        with pytest.raises(contextledger.UnknownToolCallError):
            ledger.add_tool_result(session, "never", "x")
        with pytest.raises(contextledger.DuplicateToolCallError):  # "open" still awaits its result
            ledger.add_assistant_message(session, tool_calls=[{"id": "open", "name": "run"}])
        assert ledger.add_tool_result(session, "open", "done") == ledger.version(session)
        ledger.add_assistant_message(
            session, tool_calls=[{"id": "c7", "name": "run"}]
        )  # answered: reuse allowed


def test_an_unreadable_rules_snapshot_is_rebuilt_from_the_log(tmp_path):
    """A corrupt snapshot is ignored: the rules come from replaying the session."""
    url = f"sqlite:///{tmp_path / 'r.db'}"
    with contextledger.open_ledger(url) as ledger:
        session = _long_session(ledger)
        ledger.ports.snapshots.save_snapshot(f"rules/v2/{session}", 5, b"\xc1")
    with contextledger.open_ledger(url) as ledger:
        with pytest.raises(contextledger.DuplicateToolResultError):
            ledger.add_tool_result(session, "c3", "again")
        ledger.add_tool_result(session, "open", "done")
