"""Provider call ids reused after their result (as gpt-4o does) append, render and pair on both wires."""

from __future__ import annotations

from collections import Counter

import contextledger
import pytest
from contextledger import AssistantMessageAdded, ToolResultRecorded
from contextledger.adapters.formats.anthropic import anthropic_call_ids, to_anthropic
from contextledger.adapters.formats.openai import to_openai
from contextledger.application.render.renderer import Renderer
from contextledger.projections.policy import Policy
from contextledger.testing import (
    check_anthropic_pairing,
    check_anthropic_structure,
    check_openai_pairing,
    check_openai_structure,
)
from hypothesis import given, settings
from hypothesis import strategies as st

REUSED = "call_HGn16KZh9oNCruxsMJ4gYXan"  # gpt-4o, tau-bench airline run 0, messages 8 and 12

SMALL = Policy.parse(
    {
        "name": "small",
        "budget": {"total": 900, "output_reserve": 0, "high_water": 0.9, "low_water": 0.5},
        "retention": {"default": {"keep_steps": 2}},
        "truncation": {"enabled": False},
    }
)


def _tool_uses(payload: dict) -> list[str]:
    """Every ``tool_use`` id of an Anthropic payload, in order."""
    return [
        block["id"]
        for message in payload["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_use"
    ]


def _tool_results(payload: dict) -> list[str]:
    """Every ``tool_use_id`` an Anthropic payload's ``tool_result`` blocks answer, in order."""
    return [
        block["tool_use_id"]
        for message in payload["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]


def _assert_wire_valid(context: contextledger.RenderedContext) -> tuple[dict, dict]:
    """Both payloads of ``context`` pass every pairing and structure check; Anthropic ids are unique."""
    openai, anthropic = to_openai(context), to_anthropic(context)
    assert check_openai_pairing(openai) == []
    assert check_openai_structure(openai) == []
    assert check_anthropic_pairing(anthropic) == []
    assert check_anthropic_structure(anthropic) == []
    uses = _tool_uses(anthropic)
    assert len(uses) == len(set(uses))
    return openai, anthropic


def _gpt4o_session(ledger: contextledger.Ledger) -> str:
    """The shape of tau-bench run 0: one id issued, answered, then issued again and answered again."""
    session = ledger.start_session(system_prompt="# Airline Agent Policy", model="gpt-4o")
    ledger.add_user_message(session, "Please cancel my reservation EHGLP3.")
    ledger.add_assistant_message(
        session, tool_calls=[{"id": REUSED, "name": "get_user_details", "arguments": {"user_id": "emma"}}]
    )
    ledger.add_tool_result(session, REUSED, '{"name": "Emma", "reservations": ["EHGLP3"]}')
    ledger.append(session, {"role": "assistant", "content": "I found your profile."})
    ledger.add_user_message(session, "And the flight details?")
    ledger.append(
        session,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": REUSED, "name": "get_reservation_details", "arguments": {"reservation_id": "EHGLP3"}}
            ],
        },
    )
    ledger.append(session, {"role": "tool", "call_id": REUSED, "content": '{"origin": "JFK"}'})
    ledger.add_assistant_message(session, "Your flight leaves from JFK.")
    return session


def test_a_reused_call_id_appends_through_the_public_api_and_renders_paired(ledger):
    """gpt-4o's reuse of an answered id is stored as given and renders paired in OpenAI and Anthropic."""
    session = _gpt4o_session(ledger)
    events = [r.event for r in ledger.events(session)]
    calls = [c for e in events if isinstance(e, AssistantMessageAdded) for c in e.tool_calls]
    results = [e for e in events if isinstance(e, ToolResultRecorded)]
    assert [(c.id, c.name) for c in calls] == [
        (REUSED, "get_user_details"),
        (REUSED, "get_reservation_details"),
    ]
    assert [(r.call_id, r.tool_name) for r in results] == [
        (REUSED, "get_user_details"),
        (REUSED, "get_reservation_details"),
    ]

    context = Renderer(ledger, tokenizer="heuristic").render(session, "default", budget=32_000)
    openai, anthropic = _assert_wire_valid(context)

    sent = [
        (m["role"], m.get("tool_call_id") or [c["id"] for c in m.get("tool_calls") or []])
        for m in openai["messages"]
    ]
    assert [s for s in sent if s[1]] == [
        ("assistant", [REUSED]),
        ("tool", REUSED),
        ("assistant", [REUSED]),
        ("tool", REUSED),
    ]
    assert _tool_uses(anthropic) == [REUSED, f"{REUSED}_2"]
    assert _tool_results(anthropic) == [REUSED, f"{REUSED}_2"]
    ids = anthropic_call_ids(context)
    assert ids.stored_id(f"{REUSED}_2") == REUSED
    assert ids.stored_id(REUSED) == REUSED
    assert ids.stored_id("toolu_01NewFromTheReply") == "toolu_01NewFromTheReply"


def test_a_reused_call_id_still_pending_renders_its_placeholder_under_the_unique_id(ledger):
    """The reissued call awaiting its result gets the placeholder result, paired with its own wire id."""
    session = ledger.start_session(model="gpt-4o")
    ledger.add_user_message(session, "go")
    ledger.add_assistant_message(session, tool_calls=[{"id": "call_a", "name": "ls"}])
    ledger.add_tool_result(session, "call_a", "a.py")
    ledger.add_assistant_message(session, tool_calls=[{"id": "call_a", "name": "ls"}])
    context = Renderer(ledger, tokenizer="heuristic").render(session, "default", budget=8_000)
    _, anthropic = _assert_wire_valid(context)
    assert _tool_results(anthropic) == ["call_a", "call_a_2"]


@pytest.mark.parametrize(
    "second",
    [
        [{"role": "assistant", "tool_calls": [{"id": "call_a", "name": "ls"}]}],
        [
            {"role": "tool", "call_id": "call_a", "content": "x"},
            {
                "role": "assistant",
                "tool_calls": [{"id": "call_b", "name": "ls"}, {"id": "call_b", "name": "ls"}],
            },
        ],
        [
            {"role": "tool", "call_id": "call_a", "content": "x"},
            {"role": "assistant", "tool_calls": [{"id": "call_a", "name": "ls"}]},
            {"role": "assistant", "tool_calls": [{"id": "call_a", "name": "ls"}]},
        ],
    ],
    ids=["while-pending", "twice-in-one-message", "reuse-reused-while-pending-in-one-batch"],
)
def test_a_call_id_among_pending_calls_is_still_refused(ledger, second):
    """A duplicate among the calls awaiting results raises DuplicateToolCallError and writes nothing."""
    session = ledger.start_session()
    ledger.add_assistant_message(session, tool_calls=[{"id": "call_a", "name": "ls"}])
    before = ledger.version(session)
    with pytest.raises(contextledger.DuplicateToolCallError):
        ledger.append_many(session, second)
    assert ledger.version(session) == before


def test_a_second_result_for_an_answered_reused_call_is_refused(ledger):
    """Once both occurrences are answered, another result for the id is DuplicateToolResultError."""
    session = _gpt4o_session(ledger)
    with pytest.raises(contextledger.DuplicateToolResultError):
        ledger.add_tool_result(session, REUSED, "again")
    with pytest.raises(contextledger.UnknownToolCallError):
        ledger.add_tool_result(session, "call_never", "x")


# -- property: random sequences with reuse ----------------------------------------------------

IDS = ("call_a", "call_b", "call_c", "call_a_2", "Bash:1")
"""Few ids so reuse is frequent; ``call_a_2`` collides with the suffix of a reused ``call_a``,
``Bash:1`` is rewritten for Anthropic."""

_call = st.tuples(st.just("call"), st.lists(st.sampled_from(IDS), min_size=1, max_size=3))
_answer_all = st.tuples(st.just("answer_all"), st.integers(0, 8))
_op = st.one_of(
    _call,
    _call,
    _call,
    _answer_all,
    _answer_all,
    st.tuples(st.just("user"), st.integers(0, 30)),
    st.tuples(st.just("duplicate"), st.lists(st.sampled_from(IDS), min_size=1, max_size=3)),
    st.tuples(st.just("answer"), st.integers(0, 5)),
    st.tuples(st.just("stray"), st.sampled_from(IDS)),
)
"""Mostly calls and their answers (an agent loop), with users, refused duplicates and stray results."""


class _Agent:
    """Plays ops against a ledger session, with a reference model of the pending ids to predict refusals."""

    def __init__(self, ledger: contextledger.Ledger) -> None:
        self.ledger = ledger
        self.session = ledger.start_session(system_prompt="sys", messages=[{"role": "user", "content": "go"}])
        self.pending: list[str] = []
        self.issued: set[str] = set()

    def step(self, kind: str, arg) -> None:
        """Apply one op; an op the rule refuses must raise its typed error and change nothing."""
        ledger, session, pending = self.ledger, self.session, self.pending
        if kind == "user" and not pending:
            ledger.add_user_message(session, "word " * arg)
        elif kind == "call":
            fresh = [i for i in dict.fromkeys(arg) if i not in pending]  # issued again only once answered
            if fresh:
                ledger.add_assistant_message(
                    session, "step", tool_calls=[{"id": i, "name": "run"} for i in fresh]
                )
                pending += fresh
                self.issued |= set(fresh)
        elif kind == "duplicate" and (len(set(arg)) < len(arg) or set(arg) & set(pending)):
            before = ledger.version(session)
            with pytest.raises(contextledger.DuplicateToolCallError):
                ledger.add_assistant_message(session, tool_calls=[{"id": i, "name": "run"} for i in arg])
            assert ledger.version(session) == before
        elif kind == "answer" and pending:
            ledger.add_tool_result(session, pending.pop(arg % len(pending)), "out " * (arg * 30))
        elif kind == "answer_all":
            while pending:
                ledger.add_tool_result(session, pending.pop(0), "out " * (arg * 25))
        elif kind == "stray" and arg not in pending:
            known = arg in self.issued
            with pytest.raises(
                contextledger.DuplicateToolResultError if known else contextledger.UnknownToolCallError
            ):
                ledger.add_tool_result(session, arg, "stray")


@settings(max_examples=60, deadline=None)
@given(ops=st.lists(_op, min_size=6, max_size=40), budget=st.sampled_from([500, 900, 4_000]))
def test_random_sequences_with_reuse_never_orphan_or_duplicate_wire_ids(ops, budget):
    """Whatever order ids are issued, answered and reused in, the ledger follows the rule and both wires pair.

    A reference model (the pending ids) says which appends the ledger must accept; a render of the
    whole session and a compacted one pass the OpenAI and Anthropic pairing checks with unique
    ``tool_use`` ids.
    """
    with contextledger.open_ledger("memory://") as ledger:
        agent = _Agent(ledger)
        for kind, arg in ops:
            agent.step(kind, arg)
        events = [r.event for r in ledger.events(agent.session)]
        answered = Counter(e.call_id for e in events if isinstance(e, ToolResultRecorded))
        made = Counter(c.id for e in events if isinstance(e, AssistantMessageAdded) for c in e.tool_calls)
        assert made - answered == Counter(agent.pending)
        renderer = Renderer(ledger, tokenizer="heuristic")
        full = renderer.render(agent.session, "default", budget=200_000)  # every reuse in one request
        assert sum(len(m.tool_calls) for m in full.messages) == sum(made.values())
        _assert_wire_valid(full)
        try:
            compacted = renderer.render(agent.session, SMALL, budget=budget)
        except contextledger.PinnedOverBudgetError:
            # Pending calls and the latest user message are pinned: a tiny budget is refused, typed.
            compacted = renderer.render(agent.session, SMALL, budget=8_000)
        _assert_wire_valid(compacted)
