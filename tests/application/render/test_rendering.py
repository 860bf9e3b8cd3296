"""The Renderer service: incremental catch-up over a real ledger, summaries, blobs, hooks, errors."""

from __future__ import annotations

import contextledger
import msgspec
import pytest
from contextledger.application.render.renderer import Renderer
from contextledger.domain.errors import PinnedOverBudgetError, SessionNotFoundError, ValidationError
from contextledger.projections.injection import StaticInjection
from contextledger.projections.policy import Policy

SMALL = Policy.parse(
    {
        "name": "small",
        "budget": {
            "total": 2_000,
            "output_reserve": 0,
            "injection_reserve": 100,
            "high_water": 0.9,
            "low_water": 0.5,
        },
        "retention": {"default": {"keep_steps": 3}},
        "truncation": {"enabled": False},
    }
)


def _step(ledger: contextledger.Ledger, session: str, n: int, size: int = 60) -> None:
    ledger.add_assistant_message(
        session, f"step {n}", tool_calls=[{"id": f"c{n}", "name": "bash", "arguments": "{}"}]
    )
    ledger.add_tool_result(session, f"c{n}", " ".join(f"out{n}-{i}" for i in range(size)))


def _session(ledger: contextledger.Ledger, steps: int = 0) -> str:
    session = ledger.start_session(
        system_prompt="You are terse.", messages=[{"role": "user", "content": "fix it"}]
    )
    for n in range(steps):
        _step(ledger, session, n)
    return session


def _bytes(context: object) -> bytes:
    return msgspec.json.encode(context)


def test_incremental_renders_equal_fresh_renders(ledger):
    """A renderer that catches up after each append renders what a fresh renderer renders."""
    session = _session(ledger)
    cached = Renderer(ledger, tokenizer="cl100k_base")
    compacted = False
    for n in range(60):
        _step(ledger, session, n)
        incremental = cached.render(session, SMALL)
        fresh = Renderer(ledger, tokenizer="cl100k_base").render(session, SMALL)
        assert _bytes(incremental) == _bytes(fresh)
        assert incremental.tokens <= incremental.budget
        compacted = compacted or any(d.action == "dropped" for d in incremental.decisions)
    assert compacted


def test_render_at_an_earlier_position_then_back_to_the_head(ledger):
    """--at renders history as of a position; the head renders correctly afterwards."""
    session = _session(ledger, steps=40)
    renderer = Renderer(ledger)
    head = renderer.render(session, SMALL)
    early = renderer.render(session, SMALL, at=10)
    assert early.position == 10
    assert max(m.sources[-1] for m in early.messages if m.sources) <= 10
    assert _bytes(early) == _bytes(Renderer(ledger).render(session, SMALL, at=10))
    assert _bytes(renderer.render(session, SMALL)) == _bytes(head)


def test_a_summary_produced_earlier_than_the_cached_state_is_folded_in(ledger):
    """A summary artifact recorded after the fact, but produced at an earlier position, is not missed."""
    session = _session(ledger, steps=5)
    renderer = Renderer(ledger)
    before = renderer.render(session, SMALL)
    assert before.summary_id is None
    ledger.record_summary(
        session, covers_from=2, covers_through=8, text="The user asked to fix it.", produced_at=9
    )
    after = renderer.render(session, SMALL)
    assert after.summary_id is not None
    kinds = [m.kind for m in after.messages]
    assert kinds.count("summary") == 1
    assert kinds[after.stable_prefix - 2 : after.stable_prefix] == [
        "summary",
        "card",
    ]  # card after the summary
    assert _bytes(after) == _bytes(Renderer(ledger).render(session, SMALL))
    assert renderer.render(session, SMALL, at=8).summary_id is None


def test_blobs_are_read_only_for_messages_shown_verbatim(ledger, monkeypatch):
    """Once counted, a large result that was stubbed or dropped is never read again to render."""
    session = _session(ledger)
    ledger.add_assistant_message(
        session, "read", tool_calls=[{"id": "big", "name": "read_file", "arguments": "{}"}]
    )
    ledger.add_tool_result(session, "big", "line of text\n" * 700)  # > 8 KiB: stored as a blob
    roomy = Policy.parse(
        SMALL.model_dump() | {"budget": {"total": 20_000, "output_reserve": 0}, "window": {"keep_first": 0}}
    )
    first = Renderer(ledger).render(session, roomy)  # counts it once (the count is cached in the store)
    assert first.messages[-1].kind == "message"
    for n in range(150):
        _step(ledger, session, n, size=100)
    reads: list[str] = []
    original = ledger.ports.blobs.read_blob

    def counting(sha256: str) -> str:
        reads.append(sha256)
        return original(sha256)

    monkeypatch.setattr(ledger.ports.blobs, "read_blob", counting)
    context = Renderer(ledger).render(session, roomy)
    assert all(m.sources != (4,) or m.kind != "message" for m in context.messages)
    assert reads == []


def test_hooks_inject_next_to_the_last_user_message(ledger):
    """Hooks run after reduction, inside the injection reserve, next to the last user message."""
    session = _session(ledger, steps=3)
    hook = StaticInjection(name="memories", text="The user prefers small diffs.", reserve=50)
    context = Renderer(ledger).render(session, SMALL, hooks=[hook])
    assert context.messages[1].kind == "injection"
    assert context.tokens <= context.budget


def test_errors_are_typed(ledger):
    """Missing sessions, positions outside the session and pinned overflow raise typed errors."""
    renderer = Renderer(ledger)
    with pytest.raises(SessionNotFoundError):
        renderer.render("nope", SMALL)
    session = _session(ledger, steps=1)
    with pytest.raises(ValidationError, match=r"position 99 is outside session"):
        renderer.render(session, SMALL, at=99)
    huge = ledger.start_session(system_prompt="rules " * 3_000, messages=[{"role": "user", "content": "go"}])
    with pytest.raises(PinnedOverBudgetError, match="over by"):
        renderer.render(huge, SMALL)
