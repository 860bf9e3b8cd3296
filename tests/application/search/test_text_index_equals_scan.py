"""Search index properties: indexed search equals a brute-force scan; incremental rows equal a rebuild."""

from __future__ import annotations

import re
import zlib

import contextledger
from contextledger.adapters.store.projections import RecorderProjections
from contextledger.application.search import text_index
from contextledger.application.search.log_search import searchable_texts
from contextledger.application.search.search_view import SEARCH_VIEW, SearchView
from contextledger.application.search.text_index import TextIndex
from contextledger.application.views.view_runner import ViewRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SMALL = 3
"""Positions per chunk in these tests (TextIndex's module constant is patched to match)."""

WORDS = ["alpha", "Beta", "gamma_2", "OPS-4471", "src/app.py:12", "0x1f", "Ünïcode", "wörd", "ÆØÅ", "ß", "x"]
"""A vocabulary with case, digits, punctuation, paths and non-ASCII letters."""

texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join)
kinds = st.sampled_from(["user", "assistant", "tool"])
sessions = st.lists(st.tuples(kinds, texts), min_size=1, max_size=14)


def _session(ledger: contextledger.Ledger, steps: list[tuple[str, str]]) -> str:
    """A session of the drawn steps (a tool result always answers a call made just before it)."""
    session = ledger.start_session(system_prompt="sys Prompt", tools=[{"name": "run"}])
    for number, (kind, text) in enumerate(steps):
        if kind == "user":
            ledger.add_user_message(session, text)
        elif kind == "assistant":
            ledger.add_assistant_message(session, text, reasoning=f"why {text[::-1]}")
        else:
            call = f"c{number}"
            ledger.add_assistant_message(
                session, "call", tool_calls=[{"id": call, "name": "run", "arguments": {"q": text}}]
            )
            ledger.add_tool_result(session, call, text)
    return session


def _matches(ledger: contextledger.Ledger, events, query: str) -> list[int]:
    """The positions whose searchable texts hold ``query`` (case-insensitive), as `why` tests them."""
    pattern = re.compile(re.escape(query), re.IGNORECASE)
    return [
        r.position for r in events if any(pattern.search(t) for t, _ in searchable_texts(ledger, r.event))
    ]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=sessions, words=texts, cut=st.tuples(st.integers(0, 4), st.integers(0, 4)))
def test_indexed_search_equals_a_brute_force_scan(monkeypatch, steps, words, cut):
    """For a drawn text (whole or cut at its ends), the index finds exactly what a full scan finds."""
    monkeypatch.setattr(text_index, "CHUNK", SMALL)
    with contextledger.open_ledger("memory://") as ledger:
        session = _session(ledger, steps)
        query = words[cut[0] : len(words) - cut[1]] or words
        for q in (query, query.upper(), query.swapcase()):
            everything = _matches(ledger, ledger.events(session), q)
            assert _matches(ledger, TextIndex(ledger).scan(session, q), q) == everything
            # a second index reads the sketches and trigram filters the first one saved
            assert _matches(ledger, TextIndex(ledger).scan(session, q), q) == everything
        store = RecorderProjections(ledger.ports.log)
        ViewRunner(store, store, [SearchView(ledger, store, chunk=SMALL)]).run()
        for q in (query, query.upper()):  # the sketches and filters of the view's rows
            assert _matches(ledger, TextIndex(ledger).scan(session, q), q) == _matches(
                ledger, ledger.events(session), q
            )


@settings(max_examples=25, deadline=None)
@given(steps=sessions, batches=st.lists(st.integers(1, 5), min_size=1, max_size=4))
def test_incremental_rows_equal_rows_rebuilt_from_scratch(steps, batches):
    """Folding the view as the session grows, in any batch sizes, writes the rows of one whole fold."""
    text_index_chunk = SMALL
    with contextledger.open_ledger("memory://") as ledger:
        store = RecorderProjections(ledger.ports.log)
        kept = SearchView(ledger, store, chunk=text_index_chunk)
        half = len(steps) // 2
        session = _session(ledger, steps[:half])
        for size in batches:
            ViewRunner(store, store, [kept], batch_size=size).run()
        for number, (_, text) in enumerate(steps[half:]):
            ledger.add_user_message(session, f"{text} {number}")
            ViewRunner(store, store, [kept], batch_size=batches[number % len(batches)]).run()
        scratch = SearchView(ledger, store, name="search/scratch", chunk=text_index_chunk)
        ViewRunner(store, store, [scratch]).run()
        rows = {key: store.load_row("search/scratch", key) for key in store.row_keys("search/scratch")}
        assert {key: store.load_row(SEARCH_VIEW, key) for key in store.row_keys(SEARCH_VIEW)} == rows
        filters = {k: store.load_row("search/scratch/trigrams", k) for k in rows}
        assert {k: store.load_row(SEARCH_VIEW + "/trigrams", k) for k in rows} == filters
        assert len(rows) == ledger.version(session) // text_index_chunk


@settings(max_examples=200, deadline=None)
@given(words=st.sets(st.text(min_size=1, max_size=12), min_size=1, max_size=30), data=st.data())
def test_a_filter_rules_out_exactly_the_needles_with_a_triple_the_sketch_lacks(words, data):
    """Any piece of the sketch passes its filter; a needle passes exactly when the sketch has its triples."""
    sketch = text_index.word_list(words)
    bits = zlib.decompress(text_index.trigram_filter(sketch))
    start = data.draw(st.integers(0, len(sketch)))
    piece = sketch[start : data.draw(st.integers(start, len(sketch)))]
    assert text_index.filter_may_match(bits, text_index._triples(piece))
    other = data.draw(st.text(max_size=8)).casefold().encode("utf-8")
    wanted = text_index._triples(other)
    assert text_index.filter_may_match(bits, wanted) == (wanted <= text_index._triples(sketch))
