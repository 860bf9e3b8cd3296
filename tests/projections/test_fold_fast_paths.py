"""The fold's and the row codec's fast paths answer as the definitions they stand in for (ADR 44)."""

from __future__ import annotations

import itertools
import re

import msgspec
import pytest
from contextledger.application.render.context_rows import ContextRow, encode_row
from contextledger.domain.content import InlineText
from contextledger.domain.errors import PinnedOverBudgetError
from contextledger.domain.events import SummaryRecorded, ToolResultRecorded
from contextledger.projections import card_extract, card_state
from contextledger.projections.decisions import decisions, eviction_counts
from contextledger.projections.dispositions import dispositions_of
from contextledger.projections.fold import Projector
from contextledger.projections.groups import resize_group
from contextledger.projections.state import Entry, Group, Removed, RenderState, SummaryRef
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from projection_helpers import RecordingWords, Words, count_all, policies, resolve, sessions

WORDS = Words()
_SENTENCE_END_AS_DEFINED = re.compile(r"(?<=[.!?])\s+|\n+")
"""The sentence end as ADR 37 wrote it; ``card_extract.SENTENCE_END`` is its faster equivalent."""
_ODD_CHARS = "İıſKΣσςé\u00a0\u2028\x85\x1c\x0b\x0c\r\t"
"""Characters that fold, lower, or count as whitespace in unusual ways."""
_SENTENCE_TEXT = st.text(alphabet="ab .!?\n" + _ODD_CHARS, max_size=40)


@settings(max_examples=2_000, deadline=None)
@given(_SENTENCE_TEXT)
def test_sentence_ends_are_the_defined_ones(text):
    """The rewritten sentence end matches the same spans as the pattern it stands for, so splits are equal."""
    spans = [m.span() for m in card_extract.SENTENCE_END.finditer(text)]
    assert spans == [m.span() for m in _SENTENCE_END_AS_DEFINED.finditer(text)]
    assert card_extract.SENTENCE_END.split(text) == _SENTENCE_END_AS_DEFINED.split(text)
    kept = card_extract._SENTENCE_ENDS_KEPT.split(text)
    assert kept[0::2] == _SENTENCE_END_AS_DEFINED.split(text)
    assert "".join(kept) == text


@settings(max_examples=2_000, deadline=None)
@given(st.text(alphabet="aiIsSkK ." + _ODD_CHARS, max_size=30))
def test_folding_without_a_mapped_character_is_lowering(text):
    """``_folded`` skips the mapping only when no mapped character is there: it equals map-then-lower."""
    assert card_extract.folded(text) == text.translate(card_extract._ASCII_FOLD).lower()


def _extract_by_definition(text: str) -> str:
    """``extract`` as ADR 37 wrote it: split, then the imperative pattern searched in every sentence."""
    sentences = [s for s in _SENTENCE_END_AS_DEFINED.split(text[:50_000]) if s.strip()]
    kept = [card_extract._clip(s) for s in sentences if card_extract._IMPERATIVE.search(s)]
    if not kept:
        return card_extract._clip(text) + f" [{len(sentences)} sentences; extract: none imperative]"
    return " ".join(kept) + f" [{len(sentences) - len(kept)} other sentences left out]"


_USER_PARTS = [
    "Do not",
    "don't",
    "MUST",
    "mustn't",
    "please",
    "Required",
    "no longer",
    "make sure",
    "ſtop",
    "keep",
    "  use",
    "Fix",
    "stopped",
    "only",
    "İnstead",
    ". ",
    "! ",
    "?\n",
    "\n\n",
    " \n ",
    "[3 other sentences left out]",
]
_USER_TEXT = st.lists(
    st.one_of(st.sampled_from(_USER_PARTS), st.text(alphabet="ab Il'.!?\n" + _ODD_CHARS, max_size=10)),
    max_size=14,
).map("".join)


@settings(max_examples=2_000, deadline=None)
@given(_USER_TEXT)
def test_extraction_equals_its_sentence_by_sentence_definition(text):
    """Words looked for once in the whole folded text keep exactly the sentences the pattern keeps."""
    assert card_extract.extract(text) == _extract_by_definition(text)
    by_definition = [
        card_extract._clip(s)
        for s in _SENTENCE_END_AS_DEFINED.split(text[:50_000])
        if s.strip()
        and card_extract._IMPERATIVE.search(s)
        and not card_extract._LEFT_OUT.fullmatch(s.strip())
    ]
    assert card_extract.instructions_of(text) == by_definition


def test_extraction_reads_the_first_50000_characters_only():
    """A sentence cut at the extraction limit is judged as cut, as before (no word found past the limit)."""
    for tail in ("never", "stop", "use it", "Do not"):
        text = "x" * (50_000 - 3) + " " + tail + " now. Keep going."
        assert card_extract.extract(text) == _extract_by_definition(text)


def test_a_checkbox_across_the_checklist_limit_is_not_a_checklist_line():
    """The box pre-check reads the first 20,000 characters, as the pattern does: a box cut off is no box."""
    for start in range(19_990, 20_001):
        text = "x" * start + "\n- [x] one\n- [ ] two"
        by_pattern = tuple(
            f"[{'x' if mark in 'xX' else ' ' if mark == ' ' else '~'}] {card_extract._clip(item)}"
            for mark, item in card_state._CHECK.findall(text[:20_000])
        )
        assert card_state.checklist_of(text) == by_pattern


def _row_by_definition(state: RenderState, summaries: set[str], tool_names: set[str]) -> bytes:
    """``encode_row`` as ADR 32 wrote it: every entry tested twice, slimmed by ``structs.replace``."""

    def from_log(entry: Entry) -> bool:
        content = entry.content
        return bool(entry.tool_calls) or (isinstance(content, InlineText) and content.text != "")

    def slim(entry: Entry) -> Entry:
        content = entry.content
        keep = None if isinstance(content, InlineText) and content.text != "" else content
        return msgspec.structs.replace(entry, content=keep, tool_calls=())

    positions: list[int] = []
    groups: list[Group] = []
    for group in state.window.groups:
        if not any(from_log(e) for e in group.entries):
            groups.append(group)
            continue
        entries = []
        for entry in group.entries:
            if from_log(entry):
                positions.append(entry.position)
                entries.append(slim(entry))
            else:
                entries.append(entry)
        groups.append(msgspec.structs.replace(group, entries=tuple(entries)))
    window = msgspec.structs.replace(state.window, groups=groups)
    system = state.system != ""
    row = msgspec.structs.replace(state, window=window, system="" if system else state.system)
    return msgspec.msgpack.encode(ContextRow(row, sorted(summaries), sorted(tool_names), positions, system))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session=sessions(), policy=policies())
def test_a_row_is_encoded_as_defined(session, policy):
    """At every position the one-pass row codec writes the bytes of the two-pass definition."""
    projector = Projector(policy, WORDS)
    state = projector.start()
    for counted in count_all(session, WORDS):
        state = projector.evolve(state, counted)
        assert encode_row(state, {"s2", "s1"}, {"t"}) == _row_by_definition(state, {"s2", "s1"}, {"t"})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session=sessions(), policy=policies())
def test_group_sums_moved_by_each_result_are_the_summed_ones(session, policy):
    """At every position, every group's and the window's sums equal ``resize_group``'s sums from scratch.

    A tool result moves its group's sums (``add_result``, ADR 60) instead of summing the group again.
    """
    projector = Projector(policy, WORDS)
    state = projector.start()
    results = 0
    for counted in count_all(session, WORDS):
        state = projector.evolve(state, counted)
        results += isinstance(counted.event, ToolResultRecorded)
        window = state.window
        for group in window.groups:
            summed = resize_group(group, group.entries, state.pending_tokens)
            assert (group.tokens, group.tool_tokens) == (summed.tokens, summed.tool_tokens)
        assert window.tool_tokens == sum(g.tool_tokens for g in window.groups)
        shown = sum(s.tokens for s in window.summaries) + window.card_tokens
        assert window.tokens == shown + sum(g.tokens for g in window.groups)
    event(f"tool results folded: {results > 0}")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session=sessions(), policy=policies())
def test_a_message_over_the_cap_is_not_counted_again_to_be_cut(session, policy):
    """The fold cuts an over-cap message from the count it arrived with; only the cut forms are counted.

    Counting the whole text again hashed every large tool output once more per rebuild (~40 MB of
    SHA-256 on the bench's ledger); the count is the event's own (``CountedEvent.tokens[0]``).
    """
    counter = RecordingWords()
    projector = Projector(policy, counter)
    state = projector.start()
    cut = 0
    for counted in count_all(session, WORDS):
        state = projector.evolve(state, counted)
        content = getattr(counted.event, "content", None)
        if isinstance(content, InlineText) and content.text and state.window.groups:
            entry = state.window.groups[-1].entries[-1]
            if entry.position == counted.position and entry.rule == "cap":
                cut += 1
                assert content.text not in counter.counted
    event(f"messages cut to the cap: {cut > 0}")


_EVICTING_SETS = (
    frozenset({"stubbed", "truncated", "summarized", "dropped"}),
    frozenset({"summarized"}),
    frozenset({"dropped", "stubbed"}),
    frozenset({"truncated"}),
)
"""Subsets of the actions that take an event out of the context (``render_digest.EVICTING``)."""


def _evicted_by_fate(projector, state, evicting):
    """Each logged position counted once under the rule of its fate in the render (``dispositions_of``).

    Positions of no decision are the render's gaps between shown groups (controls), not evictions.
    """
    context = projector.render(state, resolve)
    counts: dict[str, int] = {}
    for run in dispositions_of(context):
        if run.disposition in evicting and run.rule != "not-rendered":
            counts[run.rule] = counts.get(run.rule, 0) + run.last - run.first + 1
    return counts


_RANGE_RULES = frozenset({"low-water", "window", "summary", "summary:superseded", "orphan-result"})
"""Rules of the ranges out of the window (dropped or summarized), named alike by decisions and fates."""


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session=sessions(), policy=policies(), evicting=st.sampled_from(_EVICTING_SETS))
def test_eviction_counts_are_the_fates_of_the_render_counted(session, policy, evicting):
    """At every position, ``eviction_counts`` counts each logged position once, by its fate in the render.

    A verbatim message of a stubbed group and a position two nested ranges cover are not counted twice
    (the comparison of a rebuild once read "evicted by low-water 279" for a session of 196 events).
    """
    projector = Projector(policy, WORDS)
    state = projector.start()
    nested = 0
    for counted in count_all(session, WORDS):
        state = projector.evolve(state, counted)
        counts = eviction_counts(state, evicting)
        try:
            fates = _evicted_by_fate(projector, state, evicting)
        except PinnedOverBudgetError:
            continue
        # a shown message cut or stubbed counts under its entry's rule (``cap``, ``retention:...``), which the
        # payload's dispositions name only when a decision of the same action covers it
        assert sum(counts.values()) == sum(fates.values())
        assert {r: n for r, n in counts.items() if r in _RANGE_RULES} == {
            r: n for r, n in fates.items() if r in _RANGE_RULES
        }
        assert sum(counts.values()) < state.position
        spans = sorted((d.first, d.last) for d in decisions(state) if d.action in evicting)
        nested += any(b[0] <= a[1] for a, b in itertools.pairwise(spans))
    event(f"overlapping evicting decisions: {nested > 0}")


def test_eviction_counts_count_a_nested_range_once_and_a_summary_before_a_drop():
    """A group whose late result spans a dropped run counts its own messages; a summary ranks over a drop."""
    state = RenderState(position=50)
    state.window.removed = [
        Removed(first=5, last=30, action="dropped", rule="low-water", messages=4, tokens=0),
        Removed(first=6, last=28, action="dropped", rule="low-water", messages=23, tokens=0),
        Removed(first=35, last=40, action="dropped", rule="window", messages=6, tokens=0),
    ]
    summary = SummaryRef(
        summary_id="s1", covers_from=34, covers_through=37, produced_at=45, content=InlineText("x"), tokens=5
    )
    state.window.summaries = (summary,)
    evicting = frozenset({"stubbed", "truncated", "summarized", "dropped"})
    counts = eviction_counts(state, evicting)
    assert counts == {"low-water": 26, "summary": 4, "window": 3}
    assert list(counts) == ["low-water", "summary", "window"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session=sessions(), policy=policies())
def test_a_stand_in_replaces_exactly_the_texts_shown_as_logged(session, policy):
    """``render(stand_in=...)`` is the render with each text shown as its event logged it named by position.

    Defined message by message on the plain render: a message from one event whose text is that event's
    non-empty inline text gets ``stand_in(position)``; every other message, and every other field, is
    unchanged (ADR 0064: the render digest's stand-ins, made while rendering).
    """
    projector = Projector(policy, WORDS)
    logged = {  # a generated summary carries its produced_at as seq: it logs no text at a position
        seq: e.content.text
        for seq, e in session
        if isinstance(getattr(e, "content", None), InlineText) and not isinstance(e, SummaryRecorded)
    }
    state = projector.start()
    stood_in = 0
    for counted in count_all(session, WORDS):
        state = projector.evolve(state, counted)
        try:
            plain = projector.render(state, resolve, with_decisions=False)
        except PinnedOverBudgetError:
            with pytest.raises(PinnedOverBudgetError):
                projector.render(state, resolve, stand_in=str)
            continue
        named = projector.render(state, resolve, with_decisions=False, stand_in=lambda at: f"@{at}")
        expected = [
            msgspec.structs.replace(m, text=f"@{m.sources[0]}")
            if len(m.sources) == 1 and logged.get(m.sources[0]) and m.text == logged[m.sources[0]]
            else m
            for m in plain.messages
        ]
        assert list(named.messages) == expected
        assert named.tokens == plain.tokens
        stood_in += sum(m is not e for m, e in zip(plain.messages, expected, strict=True))
    event(f"texts stood in: {stood_in > 0}")
