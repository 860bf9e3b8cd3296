"""Fixtures of the rebuild use case's tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def filled(ledger):
    """The conftest ledger holding two short sessions with a tool call each."""
    for n in range(2):
        session = ledger.start_session(session_id=f"s{n}", system_prompt="sys")
        ledger.add_user_message(session, f"question {n} " * 40)
        ledger.add_assistant_message(session, tool_calls=[{"id": "c", "name": "ls", "arguments": {}}])
        ledger.add_tool_result(session, "c", "file " * 400)
    return ledger
