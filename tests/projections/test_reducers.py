"""Unit tests of each reducer and of the pins, through the fold and the render."""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest
from contextledger.domain.errors import PinnedOverBudgetError
from contextledger.projections.context import MESSAGE_OVERHEAD, RenderedContext
from contextledger.projections.fold import Projector
from contextledger.projections.ingest import PENDING_TEXT
from contextledger.projections.policy import Policy
from contextledger.projections.reducers.truncation import cut_lines, cut_tokens
from contextledger.projections.state import RenderState
from projection_helpers import Builder, Words, orphans, resolve, words

WORDS = Words()
STUB = re.compile(r"\[result expired: (\w+) (call_\d+), ([\d,]+) tokens; restore: seq (\d+)\]")


def _policy(**sections: Any) -> Policy:
    base: dict[str, Any] = {
        "name": "test",
        "budget": {"total": 1000, "output_reserve": 0, "high_water": 0.9, "low_water": 0.9},
        "retention": {"enabled": False},
        "truncation": {"enabled": False},
        "window": {"keep_first": 0},
        "card": {"enabled": False},  # each reducer alone; the card's place is tested in test_card.py
    }
    for key, value in sections.items():
        base[key] = base.get(key, {}) | value if isinstance(value, dict) else value
    return Policy.parse(base)


def _run(policy: Policy, builder: Builder, upto: int | None = None) -> tuple[RenderState, RenderedContext]:
    projector = Projector(policy, WORDS)
    state = projector.fold(builder.counted(WORDS, upto))
    context = projector.render(state, resolve)
    assert context.tokens <= projector.budget.target
    assert orphans(context) == []
    return state, context


def _results(context: RenderedContext) -> list[Any]:
    return [m for m in context.messages if m.role == "tool"]


def test_stub_names_tool_call_size_and_restore_position():
    """An expired result becomes a stub naming its tool, call id, original size and position."""
    builder = Builder()
    builder.user()
    for _ in range(20):
        builder.step(30, tool="read_file")
    state, context = _run(_policy(retention={"enabled": True, "default": {"keep_steps": 2}}), builder)
    stubs = [m for m in _results(context) if m.kind == "stub"]
    assert stubs
    assert state.compactions >= 1
    for stub in stubs:
        match = STUB.fullmatch(stub.text)
        assert match is not None, stub.text
        assert match.group(1) == "read_file" == stub.tool_name
        assert match.group(2) == stub.tool_call_id
        assert match.group(3) == str(30 + MESSAGE_OVERHEAD)  # 30 words + the message overhead
        assert int(match.group(4)) == stub.sources[0]
    assert any(d.action == "stubbed" and d.rule == "retention:steps" for d in context.decisions)


def test_count_based_retention_is_per_tool():
    """keep_last counts the results of one tool: older read_file results are stubbed, bash stays whole."""
    builder = Builder()
    builder.user()
    for _ in range(10):
        builder.step(30, tool="read_file")
        builder.step(30, tool="bash")
    retention = {"enabled": True, "tools": {"read_file": {"keep_last": 2}}}
    state, context = _run(_policy(retention=retention, budget={"total": 1400}), builder)
    assert state.compactions == 1
    read = [m for m in _results(context) if m.tool_name == "read_file"]
    bash = [m for m in _results(context) if m.tool_name == "bash"]
    assert [m.kind for m in read[-2:]] == ["message", "message"]
    assert {m.kind for m in read[:-2]} == {"stub"}
    assert {m.kind for m in bash} == {"message"}


def test_never_evict_results_are_never_stubbed():
    """A tool marked never_evict keeps its results whole while others expire."""
    builder = Builder()
    builder.user()
    for _ in range(10):
        builder.step(30, tool="search")
        builder.step(30, tool="bash")
    retention = {"enabled": True, "default": {"keep_steps": 1}, "tools": {"search": {"never_evict": True}}}
    _, context = _run(_policy(retention=retention), builder)
    assert {m.kind for m in _results(context) if m.tool_name == "search"} == {"message"}
    assert "stub" in {m.kind for m in _results(context) if m.tool_name == "bash"}


def test_age_in_turns_expires_results_of_earlier_turns():
    """keep_turns=1 stubs the results of earlier user turns and keeps the current turn's whole."""
    builder = Builder()
    for _ in range(4):
        builder.user()
        for _ in range(5):
            builder.step(30)
    state, context = _run(_policy(retention={"enabled": True, "default": {"keep_turns": 1}}), builder)
    current = state.turns
    groups = {g.start: g.turn for g in state.window.groups}
    for message in _results(context):
        owner = max(start for start in groups if start < message.sources[0])
        assert (message.kind == "stub") == (groups[owner] < current)


def test_stubbing_happens_in_one_batch_at_a_compaction_point():
    """Between compaction points no result is stubbed; at one, every expired result is stubbed at once."""
    builder = Builder()
    builder.user()
    for _ in range(90):
        builder.step(30)
    policy = _policy(
        budget={"total": 2000, "output_reserve": 0, "high_water": 0.9, "low_water": 0.5},
        retention={"enabled": True, "default": {"keep_steps": 3}},
    )
    projector = Projector(policy, WORDS)
    state = projector.start()
    stubs_seen: list[tuple[int, int]] = []
    for counted in builder.counted(WORDS):
        state = projector.evolve(state, counted)
        context = projector.render(state, resolve)
        stubbed = sum(m.kind == "stub" and bool(m.sources) for m in context.messages)
        stubs_seen.append((state.compactions, stubbed))
    by_compaction: dict[int, set[int]] = {}
    for compactions, stubbed in stubs_seen:
        by_compaction.setdefault(compactions, set()).add(stubbed)
    assert max(by_compaction) >= 2
    assert all(len(counts) == 1 for counts in by_compaction.values())
    assert by_compaction[0] == {0}
    assert by_compaction[1] != {0}


def test_keep_first_head_survives_compaction_and_leads_the_prefix():
    """The keep_first head stays pinned through compactions and forms the stable prefix."""
    builder = Builder()
    task = builder.user()
    first_step = builder.step(10)
    for _ in range(40):
        builder.step(30)
    policy = _policy(
        budget={"total": 800, "output_reserve": 0, "high_water": 0.9, "low_water": 0.5, "head_cap": 0.3},
        window={"keep_first": 1, "keep_first_unit": "steps"},
    )
    state, context = _run(policy, builder)
    assert state.compactions >= 1
    assert context.messages[0].sources == (task,)
    assert context.messages[1].sources == (first_step,)
    assert context.stable_prefix == 3
    assert any(d.action == "pinned" and d.rule == "keep_first" for d in context.decisions)
    assert any(d.action == "dropped" for d in context.decisions)


def test_first_task_and_latest_request_are_pinned():
    """The first user task and the latest user message survive however much is dropped."""
    builder = Builder()
    first = builder.user(8)
    for _ in range(5):
        builder.user(8)
        for _ in range(6):
            builder.step(30)
    latest = builder.user(8)
    builder.step(30)
    _, context = _run(
        _policy(budget={"total": 400, "output_reserve": 0, "high_water": 0.9, "low_water": 0.4}), builder
    )
    users = [m.sources[0] for m in context.messages if m.role == "user"]
    assert users[0] == first
    assert users[-1] == latest
    assert len(users) < 7
    rules = {d.rule for d in context.decisions if d.action == "pinned"}
    assert {"first-task", "latest-user"} <= rules


def test_explicit_pin_keeps_a_group_until_unpinned():
    """An ItemPinned group is never evicted; after ItemUnpinned the next compaction may drop it."""
    builder = Builder()
    builder.user()
    builder.step(30)
    pinned_step = builder.step(30)
    builder.pin(pinned_step + 1)  # the pin names the result: the whole group stays
    for _ in range(20):
        builder.step(30)
    policy = _policy(budget={"total": 500, "output_reserve": 0, "high_water": 0.9, "low_water": 0.4})
    _, context = _run(policy, builder)
    assert pinned_step in {m.sources[0] for m in context.messages}
    assert any(d.rule == "explicit" and d.first == pinned_step for d in context.decisions)
    builder.unpin(pinned_step + 1)
    for _ in range(20):
        builder.step(30)
    _, later = _run(policy, builder)
    assert pinned_step not in {m.sources[0] for m in later.messages}


def test_pending_calls_render_a_placeholder_and_are_pinned():
    """A call still waiting for its result renders a placeholder result and is never evicted."""
    builder = Builder()
    builder.user()
    waiting = builder.step(30, 30, answer=False)
    builder.result("call_1", 30)
    for _ in range(20):
        builder.step(30)
    policy = _policy(budget={"total": 500, "output_reserve": 0, "high_water": 0.9, "low_water": 0.4})
    _, context = _run(policy, builder)
    placeholders = [m for m in context.messages if m.text == PENDING_TEXT]
    assert [m.tool_call_id for m in placeholders] == ["call_2"]
    assert waiting in {m.sources[0] for m in context.messages if m.sources}
    builder.result("call_2", 5)
    _, answered = _run(policy, builder)
    assert not [m for m in answered.messages if m.text == PENDING_TEXT]


def test_latest_summary_replaces_what_it_covers_and_respects_produced_at():
    """A summary covering positions <= N replaces them with one block at the front, only once produced."""
    builder = Builder()
    builder.user()
    for _ in range(6):
        builder.step(10)
    before = builder.position
    builder.summary(2, 10, n=12, summary_id="s1")
    builder.step(10)
    policy = _policy(budget={"total": 5000, "output_reserve": 0})
    _, early = _run(policy, builder, upto=before - 1)
    assert all(m.kind != "summary" for m in early.messages)
    state, context = _run(policy, builder)
    first = context.messages[0]
    assert first.kind == "summary"
    assert first.sources == (2, 10)
    # The model is told what it reads: a condensation of positions 2-10, not words the user said.
    assert first.text.startswith("[Summary of earlier turns (log positions 2-10), made by contextledger; ")
    assert "not the user's words]" in first.text.splitlines()[0]
    assert context.summary_id == "s1"
    assert context.stable_prefix == 1
    # The first task stays pinned right after the summary; everything else covered is gone.
    assert context.messages[1].sources == (2,)
    assert min(m.sources[0] for m in context.messages[2:]) > 10
    assert any(d.action == "summarized" and (d.first, d.last) == (2, 10) for d in context.decisions)
    assert state.compactions == 1


def test_a_summary_over_its_size_bound_is_never_applied():
    """An artifact above ``summary.max_tokens`` is recorded but never shown: what it covers stays verbatim.

    Peers applied summaries as long as what they replaced. The bound counts the summary as it renders
    (its text, the header naming its span, the message overhead): at 37 words it renders at exactly the
    bound of 60 tokens and is shown; one word more and it is not.
    """
    policy = _policy(budget={"total": 5000, "output_reserve": 0}, summary={"max_tokens": 60})
    shown = {}
    for n in (37, 38):
        builder = Builder()
        builder.user()
        for _ in range(6):
            builder.step(10)
        builder.summary(2, 10, n=n, summary_id=f"s{n}")
        builder.step(10)
        state, context = _run(policy, builder)
        summaries = [m.tokens for m in context.messages if m.kind == "summary"]
        shown[n] = (context.summary_id, summaries, state.compactions)
        if context.summary_id is None:
            assert min(m.sources[0] for m in context.messages) == 2  # nothing covered was taken out
            assert not any(d.action == "summarized" for d in context.decisions)
    assert shown == {37: ("s37", [60], 1), 38: (None, [], 0)}


def test_a_context_pinned_above_the_high_mark_is_not_compacted_at_every_event():
    """Pinned text keeps the context above the high-water mark: no compaction loop, and never over target.

    Peers compacted 48 times in 76 minutes on a context no compaction could bring under its mark. Here a
    pinned message leaves every compaction above the high mark. The events after one are compaction
    points only once the context passes the target (where the hard guarantee drops the oldest steps):
    about one event in six, not every event while it stays above the high mark.
    """
    builder = Builder()
    builder.pin(builder.user(820))
    for _ in range(30):
        builder.step(1, text=1)
    policy = _policy(budget={"total": 1000, "output_reserve": 0, "high_water": 0.8, "low_water": 0.5})
    projector = Projector(policy, WORDS)
    state = projector.start()
    rows = []
    for counted in builder.counted(WORDS):
        state = projector.evolve(state, counted)
        rows.append((state.total, state.compactions))
    high, target = projector.budget.high_mark, projector.budget.target
    after = rows[3:]  # from the first event after the pin on
    assert all(high < total <= target for total, _ in after)
    assert after[-1][1] - after[0][1] <= len(after) // 5
    quiet = sum(1 for (_, was), (_, now) in itertools.pairwise(after) if now == was)
    assert quiet >= len(after) * 3 // 4  # most events above the high mark are not compaction points


def test_clip_mode_shows_first_and_last_batches():
    """In clip mode the first N and last N summary batches are shown, oldest first."""
    builder = Builder()
    builder.user()
    for batch in range(5):
        start = builder.position + 1
        for _ in range(3):
            builder.step(10)
        builder.summary(start, builder.position, summary_id=f"b{batch}")
    builder.step(5)
    policy = _policy(
        budget={"total": 5000, "output_reserve": 0}, summary={"mode": "clip", "clip_first": 1, "clip_last": 2}
    )
    _, context = _run(policy, builder)
    shown = [m.sources for m in context.messages if m.kind == "summary"]
    assert len(shown) == 3
    assert shown == sorted(shown)
    assert context.summary_id == "b4"


def test_hard_guarantee_drops_oldest_whole_groups_never_half_a_pair():
    """Over budget, the oldest unpinned groups go whole: every kept call keeps its result."""
    builder = Builder()
    builder.user()
    for _ in range(30):
        builder.step(20, 20)
    state, context = _run(_policy(budget={"total": 300, "output_reserve": 0}), builder)
    dropped = [d for d in context.decisions if d.action == "dropped"]
    assert dropped
    assert dropped[0].first == 3
    assert state.total == context.tokens <= 300


def test_pinned_items_over_budget_raise_saying_by_how_much():
    """When the pinned items alone exceed the target, rendering raises with the excess."""
    builder = Builder(system="sys " * 200)
    builder.user()
    projector = Projector(_policy(budget={"total": 150, "output_reserve": 0}), WORDS)
    state = projector.fold(builder.counted(WORDS))
    with pytest.raises(PinnedOverBudgetError, match=r"over by \d+") as raised:
        projector.render(state, resolve)
    assert raised.value.pinned_tokens - raised.value.budget_tokens == raised.value.over_by > 0
    assert raised.value.budget_tokens == 150


def test_giant_latest_result_is_cut_on_arrival_to_fit():
    """A result larger than the whole budget is cut on arrival (naming its restore position), not fatal."""
    builder = Builder()
    builder.user()
    builder.step(10)
    builder.step(50_000)
    state, context = _run(_policy(budget={"total": 2000, "output_reserve": 0}), builder)
    last = context.messages[-1]
    assert last.kind == "truncated"
    assert f"restore: seq {builder.position}" in last.text
    assert last.tokens <= 2000
    assert any(d.action == "truncated" and d.rule == "cap" for d in context.decisions)
    assert state.total <= 2000


def test_a_message_over_the_cap_stays_whole_until_a_compaction_point():
    """No cut without pressure: over the per-message cap but far below the budget, a task stays whole.

    At the next compaction point it shows its form cut to the cap (pinned as the first task).
    """
    builder = Builder()
    task = builder.user(400)
    builder.step(10)
    policy = _policy(budget={"total": 1000, "output_reserve": 0, "message_cap": 0.25})
    state, context = _run(policy, builder)
    shown = next(m for m in context.messages if m.sources == (task,))
    assert state.compactions == 0
    assert shown.kind == "message"
    assert shown.text == words(400, f"u{task}_")
    for _ in range(12):
        builder.step(30)
    state, context = _run(policy, builder)
    shown = next(m for m in context.messages if m.sources == (task,))
    assert state.compactions >= 1
    assert shown.kind == "truncated"
    assert shown.tokens <= 1000 // 4
    assert f"restore: seq {task}" in shown.text


def test_truncation_short_form_applies_at_compaction_only():
    """Long outputs stay whole until a compaction point, then show head and tail around a marker."""
    builder = Builder()
    builder.user()
    for _ in range(25):
        builder.step(5)
    long_step = builder.step(200)
    policy = _policy(truncation={"enabled": True, "max_lines": 6}, budget={"total": 1400})
    _, whole = _run(policy, builder)
    assert whole.messages[-1].kind == "message"
    for _ in range(3):
        builder.step(30)
    state, context = _run(policy, builder)
    assert state.compactions == 1
    cut = next(m for m in context.messages if m.sources == (long_step + 1,))
    assert cut.kind == "truncated"
    assert f"restore: seq {long_step + 1}" in cut.text
    assert len(cut.text.splitlines()) == 7


def test_cut_lines_and_cut_tokens_keep_head_and_tail():
    """cut_lines keeps head and tail lines; cut_tokens fits the limit exactly as counted."""
    text = "\n".join(f"line {i}" for i in range(100))
    cut = cut_lines(text, 10, position=7, full_tokens=200, tail_share=0.2)
    assert cut is not None
    lines = cut.splitlines()
    assert lines[:8] == [f"line {i}" for i in range(8)]
    assert lines[-2:] == ["line 98", "line 99"]
    assert "90 of 100 lines omitted" in lines[8]
    assert cut_lines(text, 100, position=7, full_tokens=200) is None
    short, tokens = cut_tokens(text, 50, WORDS, position=7, full_tokens=200)
    assert tokens == WORDS.count(short) <= 50
    assert short.startswith("line 0")


def test_window_keeps_recent_messages_pair_safe():
    """keep_recent in messages keeps whole groups: a step with its results is never split."""
    builder = Builder()
    builder.user()
    for _ in range(20):
        builder.step(30, 30)
    policy = _policy(window={"keep_first": 0, "keep_recent": 4, "keep_recent_unit": "messages"})
    _, context = _run(policy, builder)
    assert [m.role for m in context.messages] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "tool",
        "tool",
    ]


def test_scope_drops_turns_older_than_the_scope():
    """scope_turns keeps only the current turn and N earlier ones (besides pinned groups)."""
    builder = Builder()
    for _ in range(6):
        builder.user()
        for _ in range(4):
            builder.step(30)
    state, context = _run(_policy(window={"keep_first": 0, "scope_turns": 1}), builder)
    assert state.compactions >= 1
    turns = {g.turn for g in state.window.groups if g.start != state.first_user}
    assert min(turns) >= 3
    assert any(d.rule == "window:scope" for d in context.decisions)


def test_tool_result_tier_cap_stubs_oldest_results():
    """With tool results capped at 30% of the target, the oldest results are stubbed to respect it."""
    builder = Builder()
    builder.user()
    for _ in range(30):
        builder.step(30)
    policy = _policy(budget={"total": 2000, "output_reserve": 0, "tool_results_cap": 0.3})
    state, context = _run(policy, builder)
    assert state.window.tool_tokens <= 600
    assert any(d.rule == "tier:tool_results" for d in context.decisions)
