"""Persisted render snapshots: a new process catches up from them and renders what a full fold renders."""

from __future__ import annotations

import sqlite3

import contextledger
import msgspec
import pytest
from contextledger.application.render.renderer import SNAPSHOT_EVERY, Renderer


def _fill(ledger: contextledger.Ledger, steps: int) -> str:
    session = ledger.start_session(system_prompt="You are a coding agent.")
    messages: list[dict] = [{"role": "user", "content": "Fix the failing tests in money.py, please."}]
    for i in range(steps):
        messages.append(
            {"role": "assistant", "content": f"step {i}", "tool_calls": [{"id": f"c{i}", "name": "run"}]}
        )
        messages.append({"role": "tool", "call_id": f"c{i}", "content": f"output {i} " + "line\n" * (i % 40)})
    ledger.append_many(session, messages)
    return session


def _reference(ledger: contextledger.Ledger, session: str, monkeypatch, **options) -> bytes:
    """Render with snapshots switched off: a fold of the whole log."""
    with monkeypatch.context() as patch:
        patch.setattr(Renderer, "_load_snapshot", lambda self, key: None)
        return msgspec.json.encode(Renderer(ledger, tokenizer="heuristic").render(session, **options))


@pytest.fixture
def url(tmp_path) -> str:
    """A SQLite ledger file."""
    return f"sqlite:///{tmp_path / 'snap.db'}"


def test_a_new_process_reads_only_the_events_after_the_snapshot(url, monkeypatch):
    """After a snapshot, another renderer folds only newer events and renders byte-identically."""
    with contextledger.open_ledger(url) as ledger:
        session = _fill(ledger, SNAPSHOT_EVERY)
        Renderer(ledger, tokenizer="heuristic").render(session, "default", budget=4_000)
        snapshot_at = ledger.version(session)
        ledger.add_user_message(session, "And the formatter?")
    with contextledger.open_ledger(url) as ledger:
        reads: list[int] = []
        original = ledger.events

        def counting_events(session_id, *, after=0, upto=None):
            reads.append(after)
            return original(session_id, after=after, upto=upto)

        monkeypatch.setattr(ledger, "events", counting_events)
        rendered = Renderer(ledger, tokenizer="heuristic").render(session, "default", budget=4_000)
        assert reads
        assert min(reads) == snapshot_at
        monkeypatch.setattr(ledger, "events", original)
        assert msgspec.json.encode(rendered) == _reference(ledger, session, monkeypatch, budget=4_000)


def test_a_snapshot_ahead_of_the_requested_position_is_not_used(url, monkeypatch):
    """Rendering at an earlier position ignores a later snapshot and matches a fold up to that position."""
    with contextledger.open_ledger(url) as ledger:
        session = _fill(ledger, SNAPSHOT_EVERY)
        Renderer(ledger, tokenizer="heuristic").render(session, "default", budget=4_000)
    with contextledger.open_ledger(url) as ledger:
        early = Renderer(ledger, tokenizer="heuristic").render(session, "default", at=200, budget=4_000)
        assert early.position == 200
        assert msgspec.json.encode(early) == _reference(ledger, session, monkeypatch, at=200, budget=4_000)


def test_an_undecodable_snapshot_is_ignored(url, monkeypatch):
    """A snapshot written by an incompatible version is skipped: the log is refolded."""
    with contextledger.open_ledger(url) as ledger:
        session = _fill(ledger, SNAPSHOT_EVERY)
        Renderer(ledger, tokenizer="heuristic").render(session, "default", budget=4_000)
    with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
        corrupted = conn.execute(
            "UPDATE ledger_snapshots SET state = x'00ff' WHERE name LIKE 'render/%'"
        ).rowcount
    assert corrupted == 1
    with contextledger.open_ledger(url) as ledger:
        rendered = Renderer(ledger, tokenizer="heuristic").render(session, "default", budget=4_000)
        assert msgspec.json.encode(rendered) == _reference(ledger, session, monkeypatch, budget=4_000)
