"""The summaries view: rows equal the summary streams folded; incremental, sharded, SQLite and PostgreSQL."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import contextledger
import msgspec
import pytest
from contextledger.adapters.store.projections import RecorderProjections
from contextledger.adapters.summarizers.extractive import ExtractiveSummarizer
from contextledger.application.kernel.summary_log import SummaryStream, fold_requests, summary_stream
from contextledger.application.render.renderer import Renderer
from contextledger.application.summaries.compaction import Compactor
from contextledger.application.summaries.summary_view import (
    PREVIEW_CHARS,
    SUMMARIES_VIEW,
    SummariesView,
    SummaryRow,
    decode_summary_row,
    fold_summary_row,
    read_summaries,
)
from contextledger.application.summaries.summary_worker import SummaryWorker, WorkerSettings
from contextledger.application.views.view_runner import Shard, ViewRunner
from contextledger.domain.content import InlineText
from contextledger.domain.errors import StoreError
from contextledger.domain.events import (
    CompactionRequested,
    ContextOverflowReported,
    Recorded,
    SummaryAttemptFailed,
    SummaryAttemptStarted,
    SummaryRecorded,
)
from contextledger.testing import CountingIds, FixedClock
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.application.summaries.test_summaries import BUDGET, POLICY, failing

SESSIONS = [f"s{i}" for i in range(6)]


def _turns(ledger, session, numbers) -> None:
    for i in numbers:
        ledger.add_assistant_message(
            session,
            f"I'll read module {i}.",
            tool_calls=[{"id": f"c{i}", "name": "read_file", "arguments": {"path": f"src/mod{i}.py"}}],
        )
        ledger.add_tool_result(session, f"c{i}", f"def f{i}(): ...\n" * 120)


def _story(ledger, clock) -> Iterator[None]:
    """Requests, failures, a dead letter, artifacts by the worker and by hand, an overflow; pause between."""
    renderer = Renderer(ledger, tokenizer="heuristic")
    extractive = ExtractiveSummarizer(counter=renderer.counter)
    compactor = Compactor(
        ledger, renderer, summarizer=extractive.name, summarizer_config=extractive.config_sha
    )
    for session in SESSIONS:
        ledger.start_session(session_id=session, system_prompt="You are a coding agent.")
        ledger.add_user_message(session, "Fix the bug in src/app.py.")
        _turns(ledger, session, range(30))
    yield  # no summary events yet
    for session in SESSIONS[:3]:
        assert compactor.plan(session, POLICY, budget=BUDGET) is not None
    yield
    down = SummaryWorker(
        ledger,
        renderer,
        failing(),
        worker_id="down",
        settings=WorkerSettings(max_attempts=2, backoff=timedelta(seconds=10)),
    )
    assert down.run_once() == 3  # every request waits out a backoff
    yield
    clock.advance(seconds=11)
    assert down.run_once(limit=1) == 1  # one request dead-lettered
    for session in SESSIONS[3:5]:
        assert compactor.plan(session, POLICY, budget=BUDGET) is not None
    yield
    assert SummaryWorker(ledger, renderer, extractive, worker_id="up").run_once(limit=3) == 3
    ledger.record_summary(SESSIONS[2], covers_from=2, covers_through=9, text="by hand " * 40)
    yield
    _turns(ledger, SESSIONS[3], range(30, 36))
    compactor.report_overflow(SESSIONS[5], POLICY, budget=BUDGET, limit_tokens=4_000, sent_tokens=9_000)
    clock.advance(seconds=30)
    down.run_once(limit=1)
    yield


def _store(ledger) -> RecorderProjections:
    return RecorderProjections(ledger.ports.log)


def _rows(store: RecorderProjections, name: str) -> dict[str, tuple[int, bytes] | None]:
    return {key: store.load_row(name, key) for key in store.row_keys(name)}


def _open(url: str) -> tuple[contextledger.Ledger, FixedClock]:
    clock = FixedClock(step=timedelta(0))
    return contextledger.open_ledger(url, clock=clock, ids=CountingIds()), clock


def _sqlite(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.db'}"


def test_rows_equal_the_summary_streams_folded(tmp_path):
    """Each row lists the stream's artifacts and every request with the status ``fold_requests`` gives."""
    ledger, clock = _open(_sqlite(tmp_path))
    with ledger:
        for _ in _story(ledger, clock):
            pass
        store = _store(ledger)
        stats = ViewRunner(store, store, [SummariesView(store)]).run()
        assert stats.failed == {}
        seen: set[str] = set()
        for session in SESSIONS:
            stream = SummaryStream(ledger.log, session)
            row = read_summaries(store, session)
            assert row is not None
            assert row.position == ledger.log.version(summary_stream(session))
            statuses = fold_requests(r.event for r in stream.events())
            assert [r.request_id for r in row.requests] == list(statuses)
            for request in row.requests:
                status = statuses[request.request_id]
                assert (request.covers_from, request.covers_through, request.trigger) == (
                    status.request.covers_from,
                    status.request.covers_through,
                    status.request.trigger,
                )
                assert (
                    request.attempts,
                    request.lease_until,
                    request.lease_holder,
                    request.retry_after,
                    request.last_error,
                    request.summary_id,
                    request.dead,
                    request.failures,
                ) == (
                    status.attempts,
                    status.lease_until,
                    status.lease_holder,
                    status.retry_after,
                    status.last_error,
                    status.summary_id,
                    status.dead,
                    len(status.failures),
                )
                assert request.status(clock.now()) == status.status(clock.now())
                seen.add(request.status(clock.now()))
            artifacts = stream.artifacts()
            assert [a.summary_id for a in row.artifacts] == [a.summary_id for a in artifacts]
            for kept, artifact in zip(row.artifacts, artifacts, strict=True):
                text = ledger.text(artifact.content)
                assert kept.chars == len(text)
                assert kept.preview == text[:PREVIEW_CHARS]
                assert (kept.covers_from, kept.covers_through, kept.produced_at, kept.request_id) == (
                    artifact.covers_from,
                    artifact.covers_through,
                    artifact.produced_at,
                    artifact.request_id,
                )
            assert [(o.position, o.limit_tokens, o.sent_tokens) for o in row.overflows] == [
                (o.position, o.limit_tokens, o.sent_tokens) for o in stream.overflows()
            ]
        assert {"dead", "done", "open"} <= seen
        assert any(r.producer == "api" for r in read_summaries(store, SESSIONS[2]).artifacts)
        assert read_summaries(store, "no-such-session") is None


def _incremental_equals_scratch(url: str) -> None:
    ledger, clock = _open(url)
    with ledger:
        store = _store(ledger)
        live = ViewRunner(store, store, [SummariesView(store)], batch_size=3)
        for _ in _story(ledger, clock):
            live.run()
            restarted = SummariesView(store, name="summaries/restarted")  # reads every row it continues
            ViewRunner(store, store, [restarted], batch_size=2).run()
        scratch = ViewRunner(store, store, [SummariesView(store, name="summaries/scratch")])
        assert scratch.run().failed == {}
        incremental = _rows(store, SUMMARIES_VIEW)
        assert incremental == _rows(store, "summaries/scratch") == _rows(store, "summaries/restarted")
        assert sorted(incremental) == SESSIONS
        assert live.checkpoints() == {SUMMARIES_VIEW: store.load_tracking("summaries/scratch")}


def test_incremental_rows_are_byte_identical_to_a_rebuild(tmp_path):
    """Folding after every step (small batches; one view kept, or a new one each time) equals a rebuild."""
    _incremental_equals_scratch(_sqlite(tmp_path))


def test_incremental_rows_are_byte_identical_to_a_rebuild_on_postgres(pg_url):
    """The same on PostgreSQL."""
    _incremental_equals_scratch(pg_url)


def test_two_shards_together_give_the_rows_of_one_run(tmp_path):
    """Shards 0 and 1 of 2 each fold their sessions into the same rows one unsharded run writes."""
    ledger, clock = _open(_sqlite(tmp_path))
    with ledger:
        for _ in _story(ledger, clock):
            pass
        store = _store(ledger)
        ViewRunner(store, store, [SummariesView(store, name="whole")]).run()
        counts = []
        for index in range(2):
            shard = Shard(index, 2)
            ViewRunner(store, store, [SummariesView(store)], batch_size=5, shard=shard).run()
            counts.append(sum(shard.holds(key) for key in store.row_keys(SUMMARIES_VIEW)))
        assert all(counts)  # each shard holds some of the sessions
        assert _rows(store, SUMMARIES_VIEW) == _rows(store, "whole")


def test_a_kept_view_reads_back_rows_another_runner_wrote_meanwhile(tmp_path):
    """A view that started empty, resuming after another runner moved its checkpoint, reads rows back."""
    ledger, clock = _open(_sqlite(tmp_path))
    with ledger:
        store = _store(ledger)
        kept = SummariesView(store)
        steps = _story(ledger, clock)
        next(steps)
        ViewRunner(store, store, [kept]).run()  # no summary events yet: nothing written
        next(steps)
        ViewRunner(store, store, [SummariesView(store)]).run()  # another runner writes the requests
        for _ in steps:
            ViewRunner(store, store, [kept], batch_size=2).run()
        ViewRunner(store, store, [SummariesView(store, name="scratch")]).run()
        assert _rows(store, SUMMARIES_VIEW) == _rows(store, "scratch")


def test_a_session_whose_row_does_not_decode_fails_alone(tmp_path):
    """A corrupt row fails its session (named in ``failed``); the other sessions' rows still commit."""
    ledger, _ = _open(_sqlite(tmp_path))
    with ledger:
        for session in ("a", "b"):
            ledger.start_session(session_id=session, system_prompt="s")
            ledger.add_user_message(session, "hello")
            ledger.record_summary(session, covers_from=1, covers_through=2, text="first")
        store = _store(ledger)
        ViewRunner(store, store, [SummariesView(store)]).run()
        store.commit(SUMMARIES_VIEW, store.load_tracking(SUMMARIES_VIEW), {"a": (1, b"\xc1 not a row")})
        for session in ("a", "b"):
            ledger.record_summary(session, covers_from=1, covers_through=2, text="second")
        stats = ViewRunner(store, store, [SummariesView(store)]).run()
        assert list(stats.failed) == ["a"]
        assert store.load_row(SUMMARIES_VIEW, "a") == (1, b"\xc1 not a row")
        row_b = read_summaries(store, "b")
        assert row_b is not None
        assert [a.preview for a in row_b.artifacts] == ["first", "second"]


# -- the pure fold ---------------------------------------------------------------------------------

_IDS = st.sampled_from(["r1", "r2", "r3"])
_TIMES = st.datetimes(
    min_value=datetime(2026, 1, 1),  # noqa: DTZ001 - hypothesis takes naive bounds, then adds the zone
    max_value=datetime(2027, 1, 1),  # noqa: DTZ001
    timezones=st.just(UTC),
)
_EVENTS = st.one_of(
    st.builds(
        CompactionRequested,
        request_id=_IDS,
        session_id=st.just("s"),
        covers_from=st.integers(1, 5),
        covers_through=st.integers(5, 9),
        planned_at=st.integers(1, 9),
        at=_TIMES,
    ),
    st.builds(
        SummaryAttemptStarted,
        request_id=_IDS,
        attempt=st.integers(1, 4),
        worker=st.sampled_from(["w1", "w2"]),
        lease_until=_TIMES,
    ),
    st.builds(
        SummaryAttemptFailed,
        request_id=_IDS,
        attempt=st.integers(1, 4),
        worker=st.just("w1"),
        error_type=st.just("SummarizerError"),
        message=st.text(max_size=8),
        retry_after=st.none() | _TIMES,
        dead_lettered=st.booleans(),
    ),
    st.builds(
        SummaryRecorded,
        summary_id=st.text(min_size=1, max_size=4),
        session_id=st.just("s"),
        covers_from=st.just(1),
        covers_through=st.just(2),
        content=st.builds(InlineText, text=st.text(max_size=300)),
        produced_at=st.just(3),
        request_id=st.none() | _IDS,
    ),
    st.builds(
        ContextOverflowReported,
        position=st.integers(1, 9),
        limit_tokens=st.none() | st.integers(0, 10_000),
        sent_tokens=st.none() | st.integers(0, 10_000),
    ),
)


@settings(max_examples=150, deadline=None)
@given(events=st.lists(_EVENTS, max_size=25), cuts=st.lists(st.integers(0, 25), max_size=5))
def test_folding_in_any_batches_equals_folding_at_once(events, cuts):
    """Any split of a stream into batches (each row stored and read back) folds to the same row bytes."""
    recorded = [Recorded(position, event) for position, event in enumerate(events, start=1)]
    whole = fold_summary_row(None, recorded)
    row: SummaryRow | None = None
    bounds = [0, *sorted(min(cut, len(recorded)) for cut in cuts), len(recorded)]
    for start, end in itertools.pairwise(bounds):
        # Odd batches also hand back the part folded already: it is skipped.
        folded = fold_summary_row(row, recorded[:end] if start % 2 else recorded[start:end])
        row = decode_summary_row(_encode(folded))
    assert row is not None
    assert _encode(row) == _encode(whole)
    statuses = fold_requests(events)
    assert [(r.request_id, r.attempts, r.dead, r.failures, r.summary_id) for r in whole.requests] == [
        (key, s.attempts, s.dead, len(s.failures), s.summary_id) for key, s in statuses.items()
    ]
    assert whole.position == len(events)


def _encode(row: SummaryRow) -> bytes:
    return msgspec.msgpack.encode(row)


def test_a_row_is_continued_only_by_the_next_positions():
    """Events that skip positions after a row raise StoreError instead of folding a partial stream."""
    first = fold_summary_row(None, [Recorded(1, ContextOverflowReported(position=3))])
    with pytest.raises(StoreError, match="jump from position 1 to 3"):
        fold_summary_row(first, [Recorded(3, ContextOverflowReported(position=4))])
    assert fold_summary_row(first, [Recorded(1, ContextOverflowReported(position=9))]) == first
