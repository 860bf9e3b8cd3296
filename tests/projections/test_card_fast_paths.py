"""The card's fast paths give the answers of the definitions they stand in for (a rebuild's largest costs)."""

from __future__ import annotations

import contextlib
import shlex

from contextledger.domain.content import InlineText
from contextledger.domain.events import AssistantMessageAdded
from contextledger.projections import card_state, shell_files
from hypothesis import given, settings
from hypothesis import strategies as st

_SHELL_CHARS = "ab1-_./~*?=#$:,{}[]!@%^+ \t\r\n;&|()<>2é\x0b\x0c'\"\\"
_PHRASES = ["I'll use", "we decided", "Switched to", "the ROOT CAUSE is", "instead of", "decision:", "uſe"]


def _shlex_tokens(line: str) -> list[str]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    lexer.commenters = ""
    tokens: list[str] = []
    with contextlib.suppress(ValueError):
        tokens.extend(lexer)
    return tokens


@settings(max_examples=2_000, deadline=None)
@given(st.text(alphabet=_SHELL_CHARS, max_size=40))
def test_shell_tokens_equal_shlex_tokens(line):
    """Quoted or not, a command line's tokens are shlex's (posix, whitespace split, shell punctuation)."""
    assert shell_files._tokens(line) == _shlex_tokens(line)


@settings(max_examples=2_000, deadline=None)
@given(
    st.lists(
        st.one_of(st.sampled_from(_PHRASES), st.text(alphabet="ab Il'.!?\nſKİ", max_size=12)),
        max_size=8,
    ).map("".join)
)
def test_a_text_ruled_out_holds_no_decision(text):
    """The pre-check answers as the decision pattern does: never False when a sentence holds a decision."""
    assert card_state._may_decide(text) == (card_state.DECISION.search(text) is not None)


def test_a_decision_in_an_ascii_text_is_found():
    """A sentence announcing a decision, among others, is the one the card remembers."""
    card = card_state.CardState()
    text = "Reading the file. The tests fail on import. I decided to pin the version instead. Done."
    event = AssistantMessageAdded(content=InlineText(text))
    card_state.observe(card, 4, event, None)
    assert card.decisions == [(4, "I decided to pin the version instead.")]
