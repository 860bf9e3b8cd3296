"""The card's facts of a message, found once and kept, fold into the card as looking for them again does."""

from __future__ import annotations

import hashlib

import msgspec
from contextledger.domain.content import InlineText
from contextledger.domain.events import AssistantMessageAdded, ToolCall, UserMessageAdded
from contextledger.projections import card_extract, card_state
from contextledger.projections.card_state import CardState, MessageFacts
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.projections.test_card_fast_paths import _ARGUMENTS, _TOOL_NAMES, _mixed

_PARTS = [
    "I'll use", "we decided", "Switched to", "the ROOT CAUSE is", "instead of", "decision:", "uſe",
    "\n- [ ] write the test", "\n- [x] read the code", "\n1. [~] ship", "[ ]", ". Never do that. ",
    "Always run the tests.", "please keep it", "Use the cache.",
]  # fmt: skip
_ROW = msgspec.msgpack.Decoder(dict[int, MessageFacts])


def _kept(facts: MessageFacts) -> MessageFacts:
    """The facts as a later rebuild reads them: through the row's encoding."""
    return _ROW.decode(msgspec.msgpack.encode({7: facts}))[7]


def _assistant_by_definition(card: CardState, seq: int, text: str) -> None:
    """The card's assistant rule as written before the facts were kept (decisions, then the plan)."""
    head = text[:20_000]
    if card_state._may_decide(head):
        card.decisions.extend(
            (seq, card_state._clip(s))
            for s in card_extract.SENTENCE_END.split(head)
            if card_state._may_decide(s)
        )
        del card.decisions[: -card_state._KEEP]
    plan = card_state.checklist_of(text)
    if len(plan) >= 2:
        card.todo = (seq, plan)


@settings(max_examples=500, deadline=None)
@given(st.lists(_mixed(_PARTS, "ab Il'.!?\nſKİıé", 10), min_size=1, max_size=6))
def test_kept_assistant_facts_fold_as_the_rule_defines(texts):
    """Messages folded with their kept facts, found again, and by the rule's definition give one card."""
    with_kept, found, defined = CardState(), CardState(), CardState()
    for seq, text in enumerate(texts, start=1):
        event = AssistantMessageAdded(content=InlineText(text))
        card_state.observe_assistant(with_kept, seq, event, None, _kept(card_state.assistant_facts(text)))
        card_state.observe_assistant(found, seq, event, None)
        _assistant_by_definition(defined, seq, text)
    assert with_kept == found
    assert (with_kept.decisions, with_kept.todo) == (defined.decisions, defined.todo)


_CALLS = st.lists(st.builds(lambda n, a: (n, a), st.sampled_from(_TOOL_NAMES), _ARGUMENTS), max_size=3).map(
    lambda calls: tuple(ToolCall(id=f"c{i}", name=n, arguments=a) for i, (n, a) in enumerate(calls))
)
"""A message's tool calls: shell commands, editor and todo calls, arguments that are no JSON object."""


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(_mixed(_PARTS, "ab Il'.!?\n", 6), _CALLS), min_size=1, max_size=6))
def test_kept_call_facts_fold_as_found_again(messages):
    """The facts of a message's tool calls (plans, files read and changed), kept in a row, fold as found anew.

    A later rebuild reads them instead of parsing every call's arguments (a shell command's words) again.
    """
    with_kept, found = CardState(), CardState()
    for seq, (text, calls) in enumerate(messages, start=1):
        event = AssistantMessageAdded(content=InlineText(text), tool_calls=calls)
        kept = _kept(card_state.message_facts(event, None))
        assert kept.calls == card_state.calls_facts(calls)
        card_state.observe_assistant(with_kept, seq, event, None, kept)
        card_state.observe_assistant(found, seq, event, None)
    assert with_kept == found


def test_a_message_whose_calls_touch_files_keeps_them_in_its_facts():
    """A shell command's files and a todo call's plan are in the message's facts; the fold applies those."""
    touching = ToolCall(id="a", name="bash", arguments='{"command": "cat a.py && sed -i s/x/y/ b.py"}')
    todo = ToolCall(id="b", name="TodoWrite", arguments='{"todos": ["ship it"]}')
    plain = ToolCall(id="c", name="ls", arguments="{}")
    event = AssistantMessageAdded(content=None, tool_calls=(plain, touching, todo))
    facts = card_state.message_facts(event, None)
    assert facts is not None
    assert facts.calls == (
        card_state.CallFacts(),
        card_state.CallFacts(read=("a.py",), changed=("b.py",)),
        card_state.CallFacts(todos=("[ ] ship it",)),
    )
    card = CardState()  # given the facts, the fold parses no call: an event without calls shows it
    card_state.observe_assistant(card, 4, AssistantMessageAdded(content=None), None, facts)
    assert (card.read, card.changed, card.todo) == ({"a.py": 4}, {"b.py": 4}, (4, ("[ ] ship it",)))


@settings(max_examples=200, deadline=None)
@given(_mixed(_PARTS, "ab Il'.!?\nſKİıé", 40), st.integers(0, 2_100))
def test_kept_user_facts_fold_as_the_rule_defines(text, padding):
    """A user message is kept whole up to the limit, by its extraction beyond it, with kept facts or not."""
    text = text + "x. " * (padding // 3)
    event = UserMessageAdded(content=InlineText(text))
    with_kept, found = CardState(), CardState()
    card_state.observe_user(with_kept, 3, event, None, _kept(card_state.user_facts(text)))
    card_state.observe_user(found, 3, event, None)
    whole = len(text) <= card_state._USER_CHARS
    assert with_kept == found
    assert list(found.users) == [(3, text if whole else card_extract.extract(text), whole)]


def test_a_message_without_facts_keeps_none():
    """Most messages hold no decision, no plan, and are short: their facts are the one empty value."""
    assert card_state.assistant_facts("Reading the file now.") is card_state.NO_FACTS
    assert card_state.user_facts("fix it") is card_state.NO_FACTS


def test_facts_are_only_those_of_messages():
    """``message_facts`` reads a user or assistant message's text; other events have none."""
    call = ToolCall(id="c", name="ls", arguments="{}")
    assert card_state.message_facts(AssistantMessageAdded(content=None, tool_calls=(call,)), None) is (
        card_state.NO_FACTS
    )
    assert card_state.message_facts(object(), None) is None


_PINNED = {
    1: "63e8dce2c90583d76e429e79fd489343a2d43133f09912c57bba6d2fe34f9211",  # texts only
    2: "5ea8cbe9695cdd6d6d4df10db8da767aa57e2a5736f0e1b8ba64a80b43710666",  # and the tool calls' facts
}
"""Digest of the facts of the fixtures' messages and ``_PLANTED``, per ``CARD_FACTS_FORMAT`` (kept rows are
named by the format)."""

_PLANTED = [" ".join(_PARTS[i:] + _PARTS[:i]) * (1 + i * 40) for i in range(len(_PARTS))]
"""Texts that reach each branch of the rules."""


def _fixture_messages() -> tuple[list[str], list[tuple[ToolCall, ...]]]:
    """Every message text of the fixture transcripts, and every assistant message's tool calls, sorted."""
    import contextledger  # noqa: PLC0415 - the corpus is read through the public API

    from tests.conftest import TRANSCRIPTS  # noqa: PLC0415

    texts: list[str] = []
    calls: list[tuple[ToolCall, ...]] = []
    with contextledger.open_ledger("memory://") as ledger:
        for path in sorted(TRANSCRIPTS.iterdir()):
            if path.name in {"FORMATS.md", "PROVENANCE.md"}:
                continue
            outcome = contextledger.import_file(ledger, path)
            assert outcome.error is None, (path.name, outcome.error)
        for info in sorted(ledger.sessions(), key=lambda s: s.session_id):
            for recorded in ledger.events(info.session_id):
                content = getattr(recorded.event, "content", None)
                if isinstance(recorded.event, (AssistantMessageAdded, UserMessageAdded)) and content:
                    texts.append(ledger.text(content))
                if isinstance(recorded.event, AssistantMessageAdded) and recorded.event.tool_calls:
                    calls.append(recorded.event.tool_calls)
    texts.sort()  # session ids are drawn at random: the order of the texts is not
    calls.sort(key=lambda c: [(call.name, call.arguments) for call in c])
    return texts, calls


def test_the_facts_of_a_fixed_corpus_are_pinned_to_their_format():
    """A change to what the facts functions return must raise ``CARD_FACTS_FORMAT`` (and pin the new digest).

    Rows kept by an earlier rebuild are read instead of looking again; their name carries the format,
    so facts found by other rules are never mixed with these.
    """
    texts, messages_calls = _fixture_messages()  # the fixtures are imported once
    corpus = texts + _PLANTED
    found = [card_state.assistant_facts(t) for t in corpus] + [card_state.user_facts(t) for t in corpus]
    calls = [card_state.calls_facts(c) for c in messages_calls]
    digest = hashlib.sha256(msgspec.msgpack.encode([found, calls])).hexdigest()
    assert sum(f is not card_state.NO_FACTS for f in found) > 50  # the corpus reaches the rules
    assert sum(bool(c) for c in calls) > 100  # and the calls' rules (files, plans)
    assert _PINNED.get(card_state.CARD_FACTS_FORMAT) == digest, (
        f"the card facts changed: raise CARD_FACTS_FORMAT and pin {digest}"
    )
