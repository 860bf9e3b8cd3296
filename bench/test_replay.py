"""Checks of the bench's own measuring code (wire counting, pairing, cache model, peers, floor).

Run: .venv/bin/pytest -q -p no:xdist bench/test_replay.py
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from floor import cold_render_floor
from peers import make_peers
from wire import MESSAGE_OVERHEAD, CacheTotals, WireCounter, common_prefix, pairing_problems


def _call(call_id: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": {"name": "run", "arguments": "{}"}}],
    }


def _result(call_id: str, text: str = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def test_pairing_accepts_paired_and_reused_ids() -> None:
    """A call answered before the next message is paired, even when a later call reuses its id."""
    messages = [{"role": "user", "content": "go"}, _call("a"), _result("a"), _call("a"), _result("a")]
    assert pairing_problems(messages) == []


@pytest.mark.parametrize(
    ("messages", "fragment"),
    [
        ([{"role": "user", "content": "go"}, _result("a")], "answers no pending call"),
        ([_call("a"), {"role": "user", "content": "next"}], "left unanswered"),
        ([_call("a")], "end: calls"),
    ],
)
def test_pairing_flags_orphans(messages: list[dict[str, Any]], fragment: str) -> None:
    """A result without its call, or a call without its result, is reported."""
    problems = pairing_problems(messages)
    assert problems
    assert fragment in problems[0]


def test_counting_includes_overhead_and_tool_calls() -> None:
    """A message costs the overhead plus its role, content and tool-call JSON tokens."""
    counter = WireCounter()
    plain = counter.message_size({"role": "user", "content": "hello"})
    assert plain == MESSAGE_OVERHEAD + len(counter.text_tokens("user")) + len(counter.text_tokens("hello"))
    assert counter.message_size(_call("abc")) > MESSAGE_OVERHEAD + len(counter.text_tokens("assistant"))


def test_common_prefix_appended_and_edited() -> None:
    """Appending keeps the whole previous request as prefix; an edit in the middle cuts it there."""
    counter = WireCounter()
    base = [{"role": "system", "content": "s " * 50}, {"role": "user", "content": "task " * 50}]
    first = counter.request({"messages": base})
    grown = counter.request({"messages": [*base, {"role": "assistant", "content": "x"}]})
    assert common_prefix(first, grown) == first.size
    edited = counter.request({"messages": [base[0], {"role": "user", "content": "task " * 10 + "other"}]})
    system_size = counter.message_size(base[0])
    assert system_size + MESSAGE_OVERHEAD < common_prefix(first, edited) < first.size


def test_cache_costs_follow_the_model() -> None:
    """Second request with a >=1,024-token shared prefix: reads at 0.1x, the rest written at 1.25x."""
    counter = WireCounter()
    base = [{"role": "user", "content": "word " * 3000}]
    first = counter.request({"messages": base})
    second = counter.request({"messages": [*base, {"role": "assistant", "content": "done"}]})
    totals = CacheTotals()
    totals.add(first)
    totals.add(second)
    assert totals.prefix_breaks == 0
    assert totals.cached_anthropic == first.size
    expected = 1.25 * first.size + 0.1 * first.size + 1.25 * (second.size - first.size)
    assert totals.cost_anthropic == pytest.approx(expected)
    assert totals.cached_openai == (first.size // 128) * 128


def _history(steps: int) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = [{"role": "user", "content": "fix the bug"}]
    for step in range(steps):
        history += [_call(f"c{step}"), _result(f"c{step}", f"output {step} " * 200)]
    return history


def test_peers_stay_paired_and_within_budget() -> None:
    """Window peers and masking never orphan a result and keep requests within the budget."""
    counter = WireCounter()
    system = [{"role": "system", "content": "you are an agent"}]
    history = _history(40)
    for peer in make_peers(counter, 4_000):
        if peer.name in {"unmanaged", "trim_messages_nostart"}:
            continue
        totals = CacheTotals()
        for end in range(2, len(history) + 1):
            if history[end - 1]["role"] != "tool":
                continue
            messages = peer.prompt(system, history[:end], 0)
            assert pairing_problems(messages) == [], peer.name
            request = counter.request({"messages": messages})
            assert request.size <= 4_000, peer.name
            totals.add(request)
        assert totals.calls == 40


def test_chunked_window_breaks_the_prefix_less_than_per_turn() -> None:
    """Hysteresis: the chunked window cuts rarely, the per-turn window on almost every call."""
    counter = WireCounter()
    history = _history(60)
    breaks = {}
    for peer in make_peers(counter, 6_000):
        if peer.name not in {"window_per_turn", "chunked_window"}:
            continue
        totals = CacheTotals()
        for end in range(3, len(history) + 1, 2):
            totals.add(counter.request({"messages": peer.prompt([], history[:end], 0)}))
        breaks[peer.name] = totals.prefix_breaks
    assert breaks["chunked_window"] < breaks["window_per_turn"] / 3


def test_cold_floor_builds_the_shown_messages(tmp_path: Path) -> None:
    """The sqlite3+msgspec floor reads the shown events of a real ledger file into the payload."""
    import contextledger  # noqa: PLC0415

    db = tmp_path / "floor.db"
    with contextledger.open_ledger(f"sqlite:///{db}") as ledger:
        session_id = ledger.start_session(system_prompt="sys")
        ledger.append_many(
            session_id,
            [
                {"role": "user", "content": "long " * 5000},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"id": "c1", "name": "read", "arguments": "{}"}],
                },
                {"role": "tool", "call_id": "c1", "content": "result"},
            ],
        )
    body = msgspec.json.decode(cold_render_floor(str(db), session_id, [2, 3, 4]))
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user", "assistant", "tool"]
    assert body["messages"][1]["content"] == "long " * 5000
    assert body["messages"][3]["tool_call_id"] == "c1"


def test_cold_floor_from_a_snapshot_builds_the_rendered_payload(tmp_path: Path) -> None:
    """After a persisted render snapshot, the floor's body equals the payload contextledger renders."""
    import contextledger  # noqa: PLC0415
    from bench_render import build_session  # noqa: PLC0415

    db = tmp_path / "snap.db"
    with contextledger.open_ledger(f"sqlite:///{db}") as ledger:
        session_id = build_session(ledger, 1_500, seed=3)
        renderer = contextledger.Renderer(ledger)
        renderer.render(session_id, "default", budget=16_000)
        for index in range(3):
            ledger.add_user_message(session_id, f"more {index}")
        context = renderer.render(session_id, "default", budget=16_000)
        expected = contextledger.to_openai(context)["messages"]
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM ledger_snapshots WHERE name LIKE 'render/%'").fetchone()[0]
    shown = list(dict.fromkeys(s for m in context.messages for s in m.sources))
    assert msgspec.json.decode(cold_render_floor(str(db), session_id, shown))["messages"] == expected
