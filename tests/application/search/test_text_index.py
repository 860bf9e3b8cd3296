"""The search projection: chunk word sketches skip chunks that cannot match, and never miss a match."""

from __future__ import annotations

import re

from contextledger.application.audit.call_recorder import CallRecorder
from contextledger.application.audit.forensics import why
from contextledger.application.render.renderer import Renderer
from contextledger.application.search.log_search import searchable_texts
from contextledger.application.search.text_index import CHUNK, FORMAT, TextIndex
from contextledger.projections.presets import get_preset

DOTLESS = "\u0131"

FACT = "The staging PASSWORD rotates on Thursdays (ticket OPS-4471)"


def _session(ledger) -> tuple[str, int]:
    """About 2.2 chunks of events; the fact sits in the second chunk. Returns the session and its position."""
    session = ledger.start_session(system_prompt="sys", tools=[{"name": "run"}])
    messages: list[dict] = [{"role": "user", "content": "go"}]
    for i in range(CHUNK + CHUNK // 8):
        body = f"line {i} alpha beta gamma" if i != CHUNK // 2 + 300 else FACT
        messages.append(
            {"role": "assistant", "content": "next", "tool_calls": [{"id": f"c{i}", "name": "run"}]}
        )
        messages.append({"role": "tool", "call_id": f"c{i}", "content": body})
    ledger.append_many(session, messages)
    [planted] = [
        r.position
        for r in ledger.events(session)
        if any(FACT in t for t, _ in searchable_texts(ledger, r.event))
    ]
    return session, planted


def _first(events, pattern: re.Pattern[str], ledger) -> int | None:
    for recorded in events:
        if any(pattern.search(t) for t, _ in searchable_texts(ledger, recorded.event)):
            return recorded.position
    return None


def test_scan_skips_chunks_without_the_words_and_finds_the_fact(ledger):
    """Only the chunk holding every word of the query (and the open tail) is read; the match is the same."""
    session, planted = _session(ledger)
    assert CHUNK < planted <= 2 * CHUNK
    index = TextIndex(ledger)
    for query in ("ops-4471", "ASSWORD rot", "thursdays (ticket"):
        pattern = re.compile(re.escape(query), re.IGNORECASE)
        scanned = list(index.scan(session, query))
        assert {r.position for r in scanned} >= {planted}
        assert min(r.position for r in scanned) > CHUNK  # the first chunk was skipped
        assert _first(scanned, pattern, ledger) == _first(ledger.events(session), pattern, ledger) == planted
    assert index.built == 2


def test_sketches_persist_and_a_bad_one_is_rebuilt(ledger):
    """A new index loads the sketches from the snapshot store; an unreadable one is rebuilt from the log."""
    session, planted = _session(ledger)
    list(TextIndex(ledger).scan(session, "OPS-4471"))
    again = TextIndex(ledger)
    assert next(r.position for r in again.scan(session, "OPS-4471")) == CHUNK + 1
    assert again.built == 0
    ledger.ports.snapshots.save_snapshot(f"search/v{FORMAT}/{session}/1", 2 * CHUNK, b"not zlib")
    rebuilt = TextIndex(ledger)
    assert planted in {r.position for r in rebuilt.scan(session, "OPS-4471")}
    assert rebuilt.built == 1


def test_words_absent_everywhere_read_only_the_tail_and_regex_reads_all(ledger):
    """A query whose words no chunk holds reads only the open tail; a regular expression reads every chunk."""
    session, _ = _session(ledger)
    index = TextIndex(ledger)
    assert min(r.position for r in index.scan(session, "zebra-unicorn")) > 2 * CHUNK
    assert min(r.position for r in index.scan(session, r"OPS-\d+", regex=True)) == 1


def test_why_by_text_uses_the_index_and_agrees_with_position(ledger):
    """why(text) finds the fact where why(position) says it entered."""
    session, planted = _session(ledger)
    renderer = Renderer(ledger, tokenizer="heuristic")
    CallRecorder(ledger).record(renderer.render(session, "default"), get_preset("default"))
    by_text = why(ledger, session, "ops-4471", renderer=renderer)
    assert by_text.entered_at == planted
    assert why(ledger, session, "", renderer=renderer, position=planted).entered_at == planted
    assert why(ledger, session, "never said", renderer=renderer).entered_at is None


def test_a_later_question_reads_only_the_sketches_its_filters_let_through(ledger, monkeypatch):
    """The first question saves each chunk's trigram filter; the next reads no sketch a filter rules out."""
    session, planted = _session(ledger)
    list(TextIndex(ledger).scan(session, "anything"))
    read: list[int] = []
    sketch = TextIndex._sketch
    monkeypatch.setattr(
        TextIndex, "_sketch", lambda self, s, chunk: read.append(chunk) or sketch(self, s, chunk)
    )
    index = TextIndex(ledger)
    assert planted in {r.position for r in index.scan(session, "OPS-4471")}
    assert (read, index.filtered, index.built) == ([1], 1, 0)
    read.clear()
    assert min(r.position for r in TextIndex(ledger).scan(session, "zebra-unicorn")) > 2 * CHUNK
    assert read == []  # "zebra" has triples no chunk holds: no sketch read at all


def test_an_unreadable_filter_is_saved_again_and_answers_stay_the_same(ledger):
    """A corrupt filter snapshot only means reading the sketch (and saving the filter again)."""
    session, planted = _session(ledger)
    list(TextIndex(ledger).scan(session, "anything"))
    ledger.ports.snapshots.save_snapshot(f"search/v{FORMAT}/{session}/0/trigrams", CHUNK, b"not zlib")
    index = TextIndex(ledger)
    assert planted in {r.position for r in index.scan(session, "OPS-4471")}
    assert index.filtered == 0  # chunk 0's filter was unreadable; chunk 1 holds the words
    again = TextIndex(ledger)
    list(again.scan(session, "OPS-4471"))
    assert again.filtered == 1


def test_a_query_whose_casefold_adds_a_mark_still_finds_its_chunk(ledger):
    """The chunk holding "İstanbul" is read for "İstanbul" and "istanbul", not skipped ("not in the log").

    ``İ`` casefolds to ``i`` and a combining dot that is no word character; a case-ignoring match finds
    "istanbul" there. Sketches and needles are folded alike, marks dropped.
    """
    session = ledger.start_session(system_prompt="sys")
    texts = [f"note {i} alpha" for i in range(CHUNK + 50)]
    texts[100] = "Book the flight to İstanbul for Friday."
    ledger.append_many(session, [{"role": "user", "content": t} for t in texts])
    planted = 2 + 100
    for query in ("İstanbul", "flight to İstanbul", "istanbul"):
        scanned = [r.position for r in TextIndex(ledger).scan(session, query)]
        assert planted in scanned, query


def test_a_query_with_a_dotless_i_finds_the_chunk_a_case_ignoring_match_finds(ledger):
    """With U+0131 (dotless i), "stanbul" after it matches "Istanbul" and "istanbul" ignoring case.

    U+0131 casefolds to itself: the chunk was skipped, and ``why`` read the user's own words as
    "contextledger wrote it". It folds to ``i`` on both sides, and "ISTANBUL" finds it.
    """
    session = ledger.start_session(system_prompt="sys")
    texts = [f"note {i} alpha" for i in range(2 * CHUNK + 50)]
    texts[100] = "Book the flight to Istanbul for Friday."
    texts[CHUNK + 100] = f"Yar{DOTLESS}n {DOTLESS}stanbul'a u\u00e7uyoruz."
    ledger.append_many(session, [{"role": "user", "content": t} for t in texts])
    first, second = 2 + 100, 2 + CHUNK + 100
    for query, planted in ((f"{DOTLESS}stanbul", first), ("ISTANBUL", second), ("istanbul", second)):
        scanned = [r.position for r in TextIndex(ledger).scan(session, query)]
        assert planted in scanned, query
        assert re.search(re.escape(query), texts[planted - 2], re.IGNORECASE), query
    answer = why(ledger, session, f"{DOTLESS}stanbul", renderer=Renderer(ledger, tokenizer="heuristic"))
    assert answer.entered_at == first, answer.verdict


def test_a_text_with_quotes_inside_a_calls_arguments_is_found_where_it_is(ledger):
    r"""Arguments are JSON (a quote is ``\"``): their string values are searched as read, beside the JSON.

    ``why`` said "not in the log" and ``search`` found nothing for ``echo "Test project`` in a Bash call's
    command, though the model was sent it.
    """
    from contextledger.application.search.log_search import search_session  # noqa: PLC0415

    session = ledger.start_session(system_prompt="sys", tools=[{"name": "bash"}])
    command = {"command": 'mkdir -p demo && echo "Test project created at demo"\nls demo'}
    ledger.append_many(
        session,
        [
            {"role": "user", "content": "set up the demo"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "name": "bash", "arguments": command}],
            },
            {"role": "tool", "call_id": "c1", "content": "ok"},
        ],
    )
    renderer = Renderer(ledger, tokenizer="heuristic")
    for query in ('echo "Test project', '"Test project created at demo"'):
        answer = why(ledger, session, query, renderer=renderer, policy=get_preset("default"))
        assert answer.entered_at == 3, query
        assert answer.verdict != "not in the log"
        assert [hit.position for hit in search_session(ledger, session, query)] == [3]


def test_a_budget_without_a_policy_asks_about_calls_under_that_budget(ledger):
    """``why --budget N`` alone used the recorded calls (made under their own budget) and ignored N."""
    session = ledger.start_session(system_prompt="sys")
    for i in range(4):
        ledger.add_user_message(session, f"step {i}: {FACT if i == 1 else 'go on'}")
        ledger.add_assistant_message(session, f"done {i}")
    renderer = Renderer(ledger, tokenizer="heuristic")
    CallRecorder(ledger).record(renderer.render(session, "default", budget=3_000), get_preset("default"))
    assert why(ledger, session, "ops-4471", renderer=renderer).calls_source == "recorded"
    asked = why(ledger, session, "ops-4471", renderer=renderer, budget=200_000)
    assert asked.calls_source == "computed"
    assert {call.budget for call in asked.calls} == {200_000}
