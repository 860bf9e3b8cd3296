"""The card's fit with a tokenizer's lower bound: the same card, without counting views that cannot fit."""

from __future__ import annotations

import msgspec
from contextledger.domain.content import InlineText
from contextledger.domain.errors import ContextLedgerError
from contextledger.domain.events import (
    AssistantMessageAdded,
    SessionStarted,
    ToolCall,
    ToolResultRecorded,
    UserMessageAdded,
)
from contextledger.domain.ports import TokenFloor
from contextledger.projections.fold import Projector
from contextledger.projections.policy import Policy
from hypothesis import HealthCheck, given, settings
from projection_helpers import RecordingWords, Words, count_all, policies, resolve, sessions


class FlooredWords(RecordingWords):
    """Words that also bound a count from below (half the words) and record every text it counts."""

    def tokens_at_least(self, text: str) -> int:
        """Return half the words: never above the count."""
        return len(text.split()) // 2


def _renders(policy: Policy, session, counter) -> list[bytes | str]:
    """Each render's bytes (or the error it raised) after each event, then the error that ended the fold."""
    projector = Projector(policy, counter)
    state = projector.start()
    out: list[bytes | str] = []
    try:
        for counted in count_all(session, Words()):
            state = projector.evolve(state, counted)
            try:
                out.append(msgspec.json.encode(projector.render(state, resolve)))
            except ContextLedgerError as error:
                out.append(repr(error))
    except ContextLedgerError as error:
        out.append(repr(error))
    return out


def _long_session(users: int):
    """Many user turns, each followed by a call with a large result: the card lists hundreds of users."""
    out = [(1, SessionStarted(session_id="s", system_prompt="be brief"))]

    def add(event) -> None:
        out.append((len(out) + 1, event))

    for i in range(users):
        add(UserMessageAdded(content=InlineText(f"Task {i}: " + " ".join(f"w{i}_{k}" for k in range(40)))))
        call = ToolCall(id=f"c{i}", name="bash", arguments='{"command": "ls"}')
        add(AssistantMessageAdded(content=InlineText(f"Step {i}."), tool_calls=(call,)))
        add(ToolResultRecorded(call_id=call.id, tool_name="bash", content=InlineText("out " * 200)))
    return out


def test_the_floored_counter_is_a_token_floor():
    """The test double is what the projector looks for (the protocol is checked at run time)."""
    assert isinstance(FlooredWords(), TokenFloor)
    assert not isinstance(Words(), TokenFloor)


def test_a_long_session_counts_only_the_card_views_that_can_fit():
    """At hundreds of hidden user messages, views the bound rules out are never counted; same contexts.

    Before the bound, every view was counted at each card refresh (the first five list every hidden
    user message), a cost growing with the session.
    """
    policy = Policy.parse(
        {"base": "default", "budget": {"total": 3_000, "output_reserve": 100, "safety_margin": 0}}
    )
    session = _long_session(150)
    floored, plain = FlooredWords(), RecordingWords()
    assert _renders(policy, session, floored) == _renders(policy, session, plain)
    assert policy.card.enabled
    assert max(map(len, plain.counted)) > 5 * max(map(len, floored.counted))
    assert sum(map(len, floored.counted)) < sum(map(len, plain.counted)) / 2


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session=sessions(), policy=policies())
def test_a_lower_bound_never_changes_a_render(session, policy):
    """Every render of a generated session is byte-identical with and without the tokenizer's lower bound."""
    assert _renders(policy, session, FlooredWords()) == _renders(policy, session, Words())


class _Bounded(FlooredWords):
    """FlooredWords that also records every text it bounds."""

    def __init__(self) -> None:
        """Start with nothing bounded."""
        super().__init__()
        self.bounded: list[str] = []

    def tokens_at_least(self, text: str) -> int:
        """Return half the words; remember the text."""
        self.bounded.append(text)
        return super().tokens_at_least(text)


def test_a_view_is_given_up_while_its_user_lines_are_built():
    """A view whose hidden user lines alone pass the cap is dropped before the rest of them are built.

    At 400 hidden user messages the widest views list every one; the card gives each up once a run
    of its newest lines is above the cap, so no text it bounds holds every hidden message, and the
    contexts are the same as without the bound.
    """
    policy = Policy.parse(
        {"base": "default", "budget": {"total": 3_000, "output_reserve": 100, "safety_margin": 0}}
    )
    session = _long_session(400)
    bounded = _Bounded()
    assert _renders(policy, session, bounded) == _renders(policy, session, Words())
    assert bounded.bounded
    assert max(text.count("\n- seq ") for text in bounded.bounded) < 200
