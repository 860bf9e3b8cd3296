"""The calls view: rows equal the recorder's own reading; incremental, sharded, SQLite and PostgreSQL."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import contextledger
import pytest
from contextledger.adapters.formats.openai import to_openai
from contextledger.adapters.store.projections import RecorderProjections
from contextledger.application.audit.call_recorder import CallRecorder
from contextledger.application.audit.calls_view import CALLS_VIEW, CallsView, call_key, list_calls
from contextledger.application.render.renderer import Renderer
from contextledger.application.views.view_runner import Shard, ViewRunner
from contextledger.projections.presets import PRESETS

BUDGET = 1_500
SESSIONS = ["s1", "s10", "s1-x", "t2", "u3"]
"""Ids chosen so one is a prefix of others: a session's range read must not list another's calls."""


def _turns(ledger, session, numbers) -> None:
    for i in numbers:
        ledger.add_user_message(session, f"step {i}: look at module {i}")
        ledger.add_assistant_message(
            session,
            f"Reading module {i}.",
            tool_calls=[{"id": f"c{i}", "name": "read_file", "arguments": {"path": f"src/mod{i}.py"}}],
        )
        ledger.add_tool_result(session, f"c{i}", f"def f{i}(): ...\n" * 60)


def _story(ledger) -> Iterator[None]:
    """Calls recorded, usage reported in a later step and in the same step, more calls; pause between."""
    renderer = Renderer(ledger, tokenizer="heuristic")
    recorder = CallRecorder(ledger)
    policy = PRESETS["default"]
    for session in SESSIONS:
        ledger.start_session(session_id=session, system_prompt="You are a coding agent.")
        _turns(ledger, session, range(8))
    yield  # no calls yet

    def record(session: str, call_id: str | None = None) -> str:
        context = renderer.render(session, policy, budget=BUDGET)
        return recorder.record(context, policy, payload=to_openai(context), call_id=call_id).call_id

    early = [record(session) for session in SESSIONS for _ in range(2)]
    yield
    for number, call_id in enumerate(early[::3]):
        session = SESSIONS[early.index(call_id) // 2]
        recorder.report_usage(session, call_id, input_tokens=900 + number, output_tokens=40, latency_ms=12.5)
    yield
    for session in SESSIONS[:3]:
        _turns(ledger, session, range(8, 12))
        call_id = record(session)
        recorder.report_usage(session, call_id, input_tokens=1_200, cached_tokens=800, model="m")
    record(SESSIONS[3])
    record(SESSIONS[0], "\U0001f600-call")  # sorts after "\uffff": a range must still list it
    yield


def _store(ledger) -> RecorderProjections:
    return RecorderProjections(ledger.ports.log)


def _rows(store: RecorderProjections, name: str) -> dict[str, tuple[int, bytes] | None]:
    return {key: store.load_row(name, key) for key in store.row_keys(name)}


def _sqlite(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.db'}"


def test_rows_equal_what_the_recorder_reads(tmp_path):
    """Each session's listed calls are the recorder's calls, in order, with fates counted and usage joined."""
    with contextledger.open_ledger(_sqlite(tmp_path)) as ledger:
        for _ in _story(ledger):
            pass
        store = _store(ledger)
        assert ViewRunner(store, store, [CallsView(store)]).run().failed == {}
        recorder = CallRecorder(ledger)
        cut = 0
        for session in SESSIONS:
            views = recorder.calls(session)
            rows = list_calls(store, session)
            assert [r.call_id for r in rows] == [v.record.call_id for v in views]
            for row, view in zip(rows, views, strict=True):
                record = view.record
                assert (row.session_id, row.position, row.policy, row.policy_hash) == (
                    session,
                    record.position,
                    record.policy,
                    record.policy_hash,
                )
                assert (row.budget, row.tokenizer, row.tokens, row.summary_id, row.recorded_at) == (
                    record.budget,
                    record.tokenizer,
                    record.tokens,
                    record.summary_id,
                    record.at,
                )
                fates: Counter[str] = Counter()
                for run in record.dispositions:
                    fates[run.disposition] += run.last - run.first + 1
                assert {name: getattr(row.fates, name) for name in fates} == dict(fates)
                assert sum(getattr(row.fates, f) for f in row.fates.__struct_fields__) == record.position
                cut += row.fates.dropped + row.fates.stubbed + row.fates.truncated
                if view.usage is None:
                    assert row.usage is None
                else:
                    assert row.usage is not None
                    assert (
                        row.usage.input_tokens,
                        row.usage.cached_tokens,
                        row.usage.output_tokens,
                        row.usage.latency_ms,
                        row.usage.model,
                        row.usage.reported_at,
                    ) == (
                        view.usage.input_tokens,
                        view.usage.cached_tokens,
                        view.usage.output_tokens,
                        view.usage.latency_ms,
                        view.usage.model,
                        view.usage.at,
                    )
        assert cut > 0  # the budget made the renders leave something out
        assert sum(r.usage is not None for s in SESSIONS for r in list_calls(store, s)) == 7
        assert list_calls(store, "s") == []


def _incremental_equals_scratch(url: str) -> None:
    with contextledger.open_ledger(url) as ledger:
        store = _store(ledger)
        kept = CallsView(store)
        for _ in _story(ledger):
            ViewRunner(store, store, [kept], batch_size=4).run()
            restarted = CallsView(store, name="calls/restarted")  # reads back every row a report joins
            ViewRunner(store, store, [restarted], batch_size=3).run()
        assert ViewRunner(store, store, [CallsView(store, name="calls/scratch")]).run().failed == {}
        incremental = _rows(store, CALLS_VIEW)
        assert incremental == _rows(store, "calls/scratch") == _rows(store, "calls/restarted")
        assert len(incremental) == 15
        # A usage reported in a later batch than its call moved the row's position to the report.
        reported = [r for s in SESSIONS for r in list_calls(store, s) if r.usage is not None]
        assert all(
            incremental[call_key(r.session_id, r.call_id)][0] == r.usage.stream_position for r in reported
        )


def test_incremental_rows_are_byte_identical_to_a_rebuild(tmp_path):
    """Folding after every step (small batches; one view kept, or a new one each time) equals a rebuild."""
    _incremental_equals_scratch(_sqlite(tmp_path))


def test_incremental_rows_are_byte_identical_to_a_rebuild_on_postgres(pg_url):
    """The same on PostgreSQL."""
    _incremental_equals_scratch(pg_url)


def test_two_shards_together_give_the_rows_of_one_run(tmp_path):
    """Shards 0 and 1 of 2 each fold their sessions' calls into the rows one unsharded run writes."""
    with contextledger.open_ledger(_sqlite(tmp_path)) as ledger:
        store = _store(ledger)
        for _ in _story(ledger):
            for index in range(2):
                ViewRunner(store, store, [CallsView(store)], batch_size=3, shard=Shard(index, 2)).run()
        ViewRunner(store, store, [CallsView(store, name="whole")]).run()
        assert {Shard(0, 2).holds(s) for s in SESSIONS} == {True, False}
        assert _rows(store, CALLS_VIEW) == _rows(store, "whole")


def test_a_call_whose_row_does_not_decode_fails_its_session_alone(tmp_path):
    """A corrupt row fails its session when a usage report reads it back; other sessions still commit."""
    with contextledger.open_ledger(_sqlite(tmp_path)) as ledger:
        steps = _story(ledger)
        next(steps)
        next(steps)
        store = _store(ledger)
        ViewRunner(store, store, [CallsView(store)]).run()
        [first, *_] = list_calls(store, SESSIONS[0])
        key = call_key(SESSIONS[0], first.call_id)
        store.commit(CALLS_VIEW, store.load_tracking(CALLS_VIEW), {key: (1, b"\xc1")})
        next(steps)  # usage reports, the first of them for the corrupt row
        stats = ViewRunner(store, store, [CallsView(store)]).run()
        assert list(stats.failed) == [SESSIONS[0]]
        assert store.load_row(CALLS_VIEW, key) == (1, b"\xc1")
        assert any(r.usage is not None for r in list_calls(store, SESSIONS[1]))


@pytest.mark.parametrize("session", ["s1", "s10"])
def test_a_session_lists_only_its_own_calls(tmp_path, session):
    """``s1``'s range read stops before ``s10``'s keys, and ``s10``'s starts after ``s1``'s."""
    with contextledger.open_ledger(_sqlite(tmp_path)) as ledger:
        for _ in _story(ledger):
            pass
        store = _store(ledger)
        ViewRunner(store, store, [CallsView(store)]).run()
        listed = list_calls(store, session)
        assert listed
        assert {r.session_id for r in listed} == {session}
        assert len(listed) == len(CallRecorder(ledger).calls(session))
