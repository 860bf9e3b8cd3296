"""The card's fast paths give the answers of the definitions they stand in for (a rebuild's largest costs)."""

from __future__ import annotations

import bisect
import contextlib
import itertools
import json
import re
import shlex
from collections import Counter

from contextledger.domain.content import InlineText
from contextledger.domain.events import AssistantMessageAdded, ToolResultRecorded
from contextledger.projections import card, card_calls, card_extract, card_state, shell_files
from contextledger.projections.card_state import CardState
from contextledger.projections.position_log import PositionLog
from contextledger.projections.wire import arguments_object
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


def _mixed(parts: list[str], alphabet: str, pieces: int) -> st.SearchStrategy[str]:
    """Texts of up to ``pieces`` pieces: known phrases, and short runs of letters that fold oddly."""
    return st.lists(
        st.one_of(st.sampled_from(parts), st.text(alphabet=alphabet, max_size=12)), max_size=pieces
    ).map("".join)


@settings(max_examples=2_000, deadline=None)
@given(_mixed(_PHRASES, "ab Il'.!?\nſKİıé", 8))
def test_a_text_ruled_out_holds_no_decision(text):
    """The pre-check answers as the decision pattern does: never False when a sentence holds a decision."""
    assert card_state._may_decide(text) == (card_state.DECISION.search(text) is not None)


_ERROR_PIECES = ["Traceback (most recent call last)", "ValueError", "Exception", "error:", "fatal:", "FAILED"]


@settings(max_examples=2_000, deadline=None)
@given(_mixed(_ERROR_PIECES, "aE_.: \n\r", 40))
def test_a_result_ruled_out_holds_no_error_line(text):
    """The error pre-check is never False where the error pattern matches in the first 200 characters."""
    matched = card_state._ERROR.search(text, 0, 200) is not None
    assert not matched or card_state._may_report_error(text)


def test_a_result_opening_with_a_traceback_is_an_error():
    """A tool output whose first line starts a traceback is remembered as the card's open error."""
    card = card_state.CardState()
    event = ToolResultRecorded(
        call_id="c1", tool_name="bash", content=InlineText("ok\nTraceback (most recent call last):\n")
    )
    card_state.observe(card, 7, event, None)
    assert card.errors == [(7, "bash: ok", "")]
    quiet = ToolResultRecorded(call_id="c2", tool_name="bash", content=InlineText("all 12 tests pass\n"))
    card_state.observe(card, 8, quiet, None)
    assert len(card.errors) == 1


def test_a_decision_in_an_ascii_text_is_found():
    """A sentence announcing a decision, among others, is the one the card remembers."""
    card = card_state.CardState()
    text = "Reading the file. The tests fail on import. I decided to pin the version instead. Done."
    event = AssistantMessageAdded(content=InlineText(text))
    card_state.observe(card, 4, event, None)
    assert card.decisions == [(4, "I decided to pin the version instead.")]


_TOOL_NAMES = [
    "bash",
    "shell",
    "str_replace_editor",
    "TodoWrite",
    "update_plan",
    "read_file",
    "write_file",
    "x",
]
_ARGUMENTS = st.one_of(
    st.sampled_from(
        [
            '{"command": "cat a.py && sed -i s/x/y/ b.py > c.txt"}',
            '{"command": "view", "path": "src/m.py"}',
            '{"command": "str_replace", "path": "src/m.py", "old_str": "a", "new_str": "b"}',
            '{"path": "notes.md", "content": "- [ ] one"}',
            '{"todos": [{"content": "write tests", "status": "completed"}, "ship it"]}',
            '{"plan": ["a", {"step": "b", "status": "in_progress"}]}',
            '{"patch": "*** Update File: a.py\\n+++ b/b.py\\n"}',
            "[1, 2]",
            "not json",
            "{}",
        ]
    ),
    st.dictionaries(
        st.sampled_from(["command", "cmd", "path", "file_path", "todos", "input", "items"]),
        st.one_of(st.text(alphabet=_SHELL_CHARS, max_size=30), st.lists(st.text(max_size=8), max_size=3)),
        max_size=3,
    ).map(json.dumps),
)


def _call_facts_by_definition(name: str, arguments: str) -> card_state.CallFacts:
    """What ``_assistant`` computed per call before ``call_facts``: the parse, the plan, the files."""
    parsed = arguments_object(arguments) or {}
    todos = card_state.todo_items(parsed)
    plan = todos if todos is not None and re.search(r"todo|plan|task", name, re.IGNORECASE) else None
    touched = shell_files.files_of_call(name, parsed)
    return card_state.CallFacts(plan, touched.read, touched.changed)


@settings(max_examples=1_000, deadline=None)
@given(st.sampled_from(_TOOL_NAMES), _ARGUMENTS)
def test_call_facts_equal_their_definition(name, arguments):
    """The remembered facts of a call are the parse of its arguments, the first time and every time after."""
    expected = _call_facts_by_definition(name, arguments)
    assert card_state.call_facts(name, arguments) == expected
    assert card_state.call_facts(name, arguments) == expected  # from the memo now


@settings(max_examples=1_000, deadline=None)
@given(st.text(alphabet="ab [xX~-]\n-*1.)", max_size=60))
def test_checklist_pre_check_is_exact(text):
    """A text the pre-check skips (no ``[``) has no checklist line: the answer is the pattern's."""
    by_pattern = tuple(
        f"[{'x' if mark in 'xX' else ' ' if mark == ' ' else '~'}] {card_state._clip(item)}"
        for mark, item in card_state._CHECK.findall(text[:20_000])
    )
    assert card_state.checklist_of(text) == by_pattern


def test_every_decision_word_is_grouped_under_a_core():
    """The pre-check scans for cores first: a phrase under no core would be missed, so there is none."""
    grouped = {word for _, words in card_state._DECISION_GROUPS for word in words}
    assert grouped == set(card_state._DECISION_WORDS)


_IMPERATIVE_PARTS = [
    "Do not",
    "don't",
    "MUST",
    "mustn't",
    "Please",
    "required",
    "  use",
    "Keep",
    "make  sure",
    "ſtop",
]


@settings(max_examples=2_000, deadline=None)
@given(_mixed(_IMPERATIVE_PARTS, "ab Il'.!?\nſKİıé-", 6))
def test_the_imperative_pre_check_answers_as_the_pattern(sentence):
    """A sentence is kept by extraction exactly when the imperative pattern finds a match in it."""
    assert card_extract._imperative(sentence) == (card_extract._IMPERATIVE.search(sentence) is not None)


def test_the_fold_lowers_every_character_re_matches_to_an_ascii_letter():
    """Over every code point: a character case-blind ``re`` matches to an ASCII letter folds to that letter.

    So a phrase of ASCII letters (and spaces, apostrophes, colons, which match only themselves) that a
    case-blind pattern finds in a text is a substring of the text's folded form: the pre-checks are exact.
    """
    letter = re.compile("[a-z]", re.IGNORECASE)
    for code in range(0x80, 0x110000):
        if 0xD800 <= code <= 0xDFFF:
            continue
        char = chr(code)
        if letter.fullmatch(char):
            folded = card_extract.folded(char)
            assert len(folded) == 1, hex(code)
            assert "a" <= folded <= "z", hex(code)
            assert re.fullmatch(folded, char, re.IGNORECASE), hex(code)


def _clip_definition(text: str, limit: int) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


_CLIP_PIECES = ["a", "é", "word", " ", "\t", "\n", "\r\n", "\x0b", "\u2028", "\u3000", "    "]


@settings(max_examples=3_000, deadline=None)
@given(
    st.lists(st.sampled_from(_CLIP_PIECES), max_size=200).map("".join), st.integers(min_value=1, max_value=40)
)
def test_clip_reads_a_head_and_cuts_as_the_whole_text_does(text, limit):
    """Clipped from its head or whole, a text gives the definition's line (spaces collapsed, cut with …)."""
    assert card_calls.clip(text, limit) == _clip_definition(text, limit)


_LINE_PIECES = [*"aé \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u2028\u2029\u3000\u200b", "\r\n"]
"""Letters, the whitespace and line boundaries of ``strip`` and ``splitlines``, and a non-space (U+200B)."""


@settings(max_examples=3_000, deadline=None)
@given(st.lists(st.sampled_from(_LINE_PIECES), max_size=40).map("".join))
def test_first_line_is_the_first_line_of_the_stripped_text(text):
    """A blank text has no first line; another's is ``text.strip().splitlines()[0]`` up to trailing spaces."""
    line = card_calls.first_line(text)
    if not text.strip():
        assert line is None
    else:
        assert line is not None
        assert line.rstrip() == text.strip().splitlines()[0].rstrip()
        assert card_calls.clip(line, 120) == card_calls.clip(text.strip().splitlines()[0], 120)


def test_a_failed_calls_error_shows_the_first_line_of_its_output():
    """The card reports a failed call by its tool and the first non-blank line of its output, clipped."""
    card = card_state.CardState()
    event = ToolResultRecorded(
        call_id="c1", tool_name="bash", content=InlineText("\n  \n  boom: it broke  \nmore"), is_error=True
    )
    card_state.observe(card, 7, event, None)
    assert card.errors == [(7, "bash: boom: it broke", "")]
    blank = ToolResultRecorded(call_id="c2", tool_name="bash", content=InlineText(" \n\t"), is_error=True)
    card_state.observe(card, 8, blank, None)
    assert card.errors[-1] == (8, "bash: (no output)", "")


def _tools_in_by_definition(results: list[tuple[int, str]], first: int, last: int) -> str:
    """``card._tools_in`` as it was first written: a list of every position, then bisection (O(session))."""
    seqs = [s for s, _ in results]
    lo, hi = bisect.bisect_left(seqs, first), bisect.bisect_right(seqs, last)
    counts = Counter(name for _, name in results[lo : min(hi, lo + 2_000)])
    if not counts:
        return ""
    listed = ", ".join(f"{n} x{c}" for n, c in sorted(counts.items(), key=lambda i: (-i[1], i[0]))[:4])
    more = "" if len(counts) <= 4 else ", …"
    return f"; {hi - lo} tool results: {listed}{more}"


_TOOLS = st.sampled_from(["bash", "read_file", "edit", "grep", "ls", "web"])


@settings(max_examples=300, deadline=None)
@given(
    results=st.lists(st.tuples(st.integers(min_value=1, max_value=4), _TOOLS), max_size=60),
    first=st.integers(min_value=-2, max_value=250),
    last=st.integers(min_value=-2, max_value=250),
)
def test_the_tools_of_an_omitted_span_are_those_of_the_definition(results, first, last):
    """Bisecting the results in place gives the text the list of every position gave, for any span.

    Positions strictly increase (the fold appends each result in order); a span may be empty, reversed
    or reach past either end.
    """
    positions = list(itertools.accumulate(gap for gap, _ in results))
    listed = [(p, tool) for p, (_, tool) in zip(positions, results, strict=True)]
    state = CardState(results=PositionLog.of(listed))
    assert card._tools_in(state, first, last) == _tools_in_by_definition(listed, first, last)


@settings(max_examples=60, deadline=None)
@given(
    results=st.lists(st.tuples(st.integers(min_value=1, max_value=3), _TOOLS), min_size=200, max_size=900),
    first=st.integers(min_value=-2, max_value=2_800),
    width=st.integers(min_value=-3, max_value=2_800),
)
def test_the_tools_of_a_span_across_chunk_edges_are_those_of_the_definition(results, first, width):
    """The same, for up to 900 results: spans start, end and cross ``PositionLog``'s chunk edges."""
    positions = list(itertools.accumulate(gap for gap, _ in results))
    listed = [(p, tool) for p, (_, tool) in zip(positions, results, strict=True)]
    state = CardState(results=PositionLog.of(listed))
    last = first + width
    assert card._tools_in(state, first, last) == _tools_in_by_definition(listed, first, last)


def test_a_span_of_more_results_than_the_cap_counts_its_first_ones():
    """Of 2,500 results in a span, all are counted and the tools of the first 2,000 are listed."""
    listed = [(2 * i + 1, "bash" if i < 2_000 else "web") for i in range(2_500)]
    state = CardState(results=PositionLog.of(listed))
    text = card._tools_in(state, 0, 10_000)
    assert text == "; 2500 tool results: bash x2000"
    assert text == _tools_in_by_definition(listed, 0, 10_000)
    assert card._tools_in(state, 4_001, 10_000) == "; 500 tool results: web x500"
