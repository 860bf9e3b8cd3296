"""`simulate` on real transcripts: rows and totals agree, facts, and cache-aware compaction's effect."""

from __future__ import annotations

import math
from pathlib import Path

import contextledger
import pytest
from contextledger.adapters.importers.service import import_file
from contextledger.adapters.summarizers.extractive import ExtractiveSummarizer
from contextledger.application.rebuild.simulator import Simulation, _evicted, simulate
from contextledger.application.render.renderer import Renderer
from contextledger.domain.errors import PinnedOverBudgetError, SessionNotFoundError, ValidationError
from contextledger.projections.policy import Policy
from contextledger.projections.presets import PRESETS
from contextledger.projections.provider_cache import provider_cache

LONGEST = "mini-swe-agent__django__django-16560.traj.json"
"""The real session with the most model-call points (145 calls, 292 events)."""
GAPS = "claude-code__132b2f66-ee5f-46f6-8904-32d9dc4d36c3.jsonl"
"""The real session with recorded gaps longer than 5 minutes (5 of them, up to 645 s)."""
TASK = "I need to explore the codebase to locate `BaseConstraint`"
"""The agent's first thought (position 3), in the first turn's head: default keeps it (its step fits the head
cap), nexus (no head) does not. The next step, at 5, leaves the head when its 10,612-character result takes
the head past its cap (ADR 0092)."""
BUDGET = 32_000
TRANSCRIPTS = Path(__file__).resolve().parents[2] / "fixtures" / "transcripts"


def _simulate(source, policies, **options) -> Simulation:
    [info] = source.sessions()
    return simulate(
        source,
        [info.session_id],
        policies,
        cache=options.pop("cache", provider_cache("anthropic", "5m")),
        new_scratch=lambda: contextledger.open_ledger("memory://"),
        budget=BUDGET,
        make_summarizer=lambda counter: ExtractiveSummarizer(counter=counter),
        tokenizer="heuristic",
        **options,
    )


def _source(transcripts, name: str):
    ledger = contextledger.open_ledger("memory://")
    assert import_file(ledger, transcripts / name).ok
    return ledger


@pytest.fixture(scope="module")
def longest():
    """The longest real session, simulated under default and nexus, following two facts."""
    source = _source(TRANSCRIPTS, LONGEST)
    policies = [("default", PRESETS["default"]), ("nexus", PRESETS["nexus"])]
    return _simulate(source, policies, facts=[TASK, "no such text in the session 42"])


def test_totals_are_the_sums_of_the_per_call_rows(longest):
    """Every total of each policy equals the sum over its call rows; every call is within budget."""
    assert set(longest.totals) == {"default", "nexus"}
    for label, totals in longest.totals.items():
        rows = [c for c in longest.calls if c.policy == label]
        assert totals.calls == len(rows) == 145
        assert totals.input_tokens == sum(c.input_tokens for c in rows)
        assert totals.cached_tokens == sum(c.cached_tokens for c in rows)
        assert totals.written_tokens == sum(c.written_tokens for c in rows)
        assert totals.summary_calls == sum(c.summary_call for c in rows) > 0
        assert totals.over_budget_calls == sum(c.over_budget for c in rows) == 0
        assert totals.prefix_breaks == sum(c.prefix_break for c in rows)
        assert math.isclose(totals.cache_hit_ratio, totals.cached_tokens / totals.input_tokens)
        expected = sum(c.cost for c in rows) + sum(c.summary_input_tokens for c in rows)
        assert math.isclose(totals.effective_cost, expected)
        assert totals.effective_cost < totals.uncached_cost
        evictions: dict[str, int] = {}
        for c in rows:
            for rule, n in c.evictions.items():
                evictions[rule] = evictions.get(rule, 0) + n
        assert totals.evictions == evictions
        assert all(c.input_tokens <= c.budget <= BUDGET for c in rows)
        assert all(c.cached_tokens + c.written_tokens <= c.input_tokens for c in rows)


def test_a_fact_that_leaves_under_one_policy_but_not_the_other(longest):
    """A first-turn remark stays under default (keep_first 1 turn) and leaves under nexus (keep_first 0)."""
    fates = {(f.fact, f.policy): f for f in longest.facts}
    assert fates[TASK, "default"].left_calls == 0
    nexus = fates[TASK, "nexus"]
    assert nexus.left_calls > 0
    assert nexus.entered_at == 3
    assert nexus.rule is not None
    assert [(d.fact, d.left_under, d.kept_under) for d in longest.fact_differences] == [
        (TASK, ("nexus",), ("default",))
    ]
    missing = fates["no such text in the session 42", "default"]
    assert missing.entered_at is None
    assert missing.left_calls == 0


def test_cache_aware_compaction_costs_less_on_a_session_with_long_gaps(transcripts):
    """With compact_on_cache_expiry = 5m, the claude-code session sends less and never exceeds budget.

    Under the default preset's head as recorded before ADR 0092 (a first step over the head cap stayed
    pinned) it also costs less. With the head held to its cap the plain preset costs about a third less on
    this session, and compacting at each expiry no longer saves (it costs 0.7 % more): the cost is not
    asserted there.
    """
    source = _source(transcripts, GAPS)
    for head_cap_strict in (False, True):
        base = Policy.parse({"base": "default", "window": {"head_cap_strict": head_cap_strict}})
        aware = Policy.parse(
            {
                "base": "default",
                "window": {"head_cap_strict": head_cap_strict},
                "budget": {"compact_on_cache_expiry": "5m"},
            }
        )
        result = _simulate(source, [("plain", base), ("aware", aware)])
        plain, cached = result.totals["plain"], result.totals["aware"]
        assert plain.expired_calls == cached.expired_calls > 0
        assert cached.over_budget_calls == plain.over_budget_calls == 0
        assert cached.input_tokens < plain.input_tokens
        if not head_cap_strict:
            assert cached.effective_cost < plain.effective_cost


def test_an_unknown_session_is_session_not_found():
    """An unknown session is reported before any replay starts."""
    with pytest.raises(SessionNotFoundError):
        simulate(
            contextledger.open_ledger("memory://"),
            ["nope"],
            [("default", PRESETS["default"])],
            cache=provider_cache("openai"),
            new_scratch=lambda: contextledger.open_ledger("memory://"),
        )


def test_a_policy_label_given_twice_is_a_validation_error():
    """Totals are keyed by label: the same label twice would merge two runs, so it is refused."""
    twice = [("default", PRESETS["default"]), ("default", PRESETS["nexus"])]
    with pytest.raises(ValidationError, match="each once"):
        simulate(
            contextledger.open_ledger("memory://"),
            [],
            twice,
            cache=provider_cache("anthropic"),
            new_scratch=lambda: contextledger.open_ledger("memory://"),
        )


def test_a_fork_simulates_like_the_history_it_shows(transcripts):
    """``fork S --at 40``, then simulate both: the fork replays; its calls up to 40 equal its parent's."""
    with contextledger.open_ledger("memory://") as source:
        assert import_file(source, transcripts / "mini-swe-agent__psf__requests-1142.traj.json").ok
        [info] = source.sessions()
        fork = source.fork(info.session_id, 40)
        source.add_user_message(fork, "a question only the fork was asked")
        source.add_assistant_message(fork, "an answer only the fork gave")
        result = simulate(
            source,
            [info.session_id, fork],
            [("default", PRESETS["default"]), ("threshold", PRESETS["threshold"])],
            cache=provider_cache("anthropic", "5m"),
            new_scratch=lambda: contextledger.open_ledger("memory://"),
            budget=BUDGET,
            make_summarizer=lambda counter: ExtractiveSummarizer(counter=counter),
            tokenizer="heuristic",
        )
    for label in ("default", "threshold"):
        parent = {
            c.position: c.input_tokens for c in result.calls if c.policy == label and c.session_id != fork
        }
        child = {
            c.position: c.input_tokens for c in result.calls if c.policy == label and c.session_id == fork
        }
        assert max(child) > 40
        shared = {p: t for p, t in parent.items() if p < 40}  # the call at p is made for event p + 1
        assert shared
        assert {p: t for p, t in child.items() if p < 40} == shared


def _quoted_session():
    """A session whose first call's arguments hold a quote and a line break, then long tool results."""
    ledger = contextledger.open_ledger("memory://")
    sid = ledger.start_session(session_id="quoted", system_prompt="You are a shell agent.")
    ledger.add_user_message(sid, "Clean up the project directory.")
    command = 'echo "Removed incorrect directory (underscore)"\nls -la'
    ledger.add_assistant_message(
        sid, tool_calls=[{"id": "c0", "name": "bash", "arguments": {"cmd": command}}]
    )
    ledger.add_tool_result(sid, "c0", "Removed incorrect directory (underscore)")
    for i in range(1, 14):
        ledger.add_assistant_message(
            sid, tool_calls=[{"id": f"c{i}", "name": "bash", "arguments": {"cmd": f"cat part{i}.txt"}}]
        )
        ledger.add_tool_result(sid, f"c{i}", " ".join(f"line{i}-{w}" for w in range(300)))
    return ledger


def _simulate_quoted(source, budget: int, facts: tuple[str, ...] | list[str] = ()) -> Simulation:
    """The quoted session simulated under the default preset at ``budget`` (heuristic counts)."""
    return simulate(
        source,
        ["quoted"],
        [("default", PRESETS["default"])],
        cache=provider_cache("anthropic", "5m"),
        new_scratch=lambda: contextledger.open_ledger("memory://"),
        budget=budget,
        tokenizer="heuristic",
        facts=facts,
    )


def test_a_fact_with_a_quote_in_a_calls_arguments_is_found_where_it_is_sent():
    """A fact holding a quote that a call's JSON arguments escape is in every call that sends the call.

    ``entered_at`` reads the argument values unescaped; the contexts were searched in their JSON, so the
    fact was reported gone from the calls that sent it (``simulate --fact 'echo "Test project created'``).
    """
    source = _quoted_session()
    fact = 'echo "Removed incorrect directory'
    result = _simulate_quoted(source, 100_000, facts=[fact])
    [fate] = result.facts
    assert fate.entered_at == 3
    assert fate.left_calls == 0
    assert fate.first_left_position is None


def test_a_calls_evictions_never_count_a_message_it_shows_whole():
    """A truncated step group's call, shown verbatim, is not counted evicted (its result alone is).

    ``evictions`` counts the positions each call is the first to show evicted; a decision's range covers
    the verbatim call of a group whose result was stubbed, and the call was counted with it.
    """
    source = _quoted_session()
    result = _simulate_quoted(source, 2_500)
    counted = sum(sum(call.evictions.values()) for call in result.calls)
    assert counted > 0
    renderer_context = Renderer(source, tokenizer="heuristic").render("quoted", "default", budget=2_500)
    whole = {p for m in renderer_context.messages if m.kind == "message" for p in m.sources}
    cut = {p for m in renderer_context.messages if m.kind in ("stub", "truncated") for p in m.sources}
    assert cut, "the budget cuts a result"
    evicted = _evicted(renderer_context)
    assert cut <= set(evicted)
    assert not whole & set(evicted)
    assert any(d.first in whole for d in renderer_context.decisions if d.action in ("stubbed", "truncated"))


def test_a_render_that_cannot_be_made_names_its_session_and_policy():
    """``simulate --all`` stopped with "pinned items need ..." and no word of which session or policy."""
    source = _quoted_session()
    with pytest.raises(
        PinnedOverBudgetError, match=r"^simulating session 'quoted' under 'default' \("
    ) as raised:
        _simulate_quoted(source, 40)
    assert "pinned items need" in str(raised.value)
