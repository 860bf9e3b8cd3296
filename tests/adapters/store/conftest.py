"""Fixtures of the store tests: the statements SQLite connections send."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest


class Statements:
    """The statements sent on SQLite connections opened since the fixture, while ``recording``."""

    def __init__(self) -> None:
        self.executed: list[str] = []
        self._on = False

    @contextmanager
    def recording(self) -> Iterator[list[str]]:
        """Record from now on, into a list cleared first (it stays readable after the block)."""
        self.executed.clear()
        self._on = True
        try:
            yield self.executed
        finally:
            self._on = False

    def trace(self, sql: str) -> None:
        """The connections' trace callback."""
        if self._on:
            self.executed.append(sql)


@pytest.fixture
def sqlite_statements(monkeypatch: pytest.MonkeyPatch) -> Statements:
    """Every SQLite connection opened from now on traces its statements into the returned ``Statements``."""
    statements = Statements()
    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)
        conn.set_trace_callback(statements.trace)
        return conn

    monkeypatch.setattr(sqlite3, "connect", traced)
    return statements
