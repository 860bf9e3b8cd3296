"""Summaries off the critical path: planning, the worker, failures that change nothing, replay."""

from __future__ import annotations

import asyncio
import itertools
import threading
from datetime import timedelta

import contextledger
import msgspec
import pytest
from contextledger.adapters.summarizers.extractive import ExtractiveSummarizer
from contextledger.application.kernel.summary_log import SummaryStream
from contextledger.application.render.renderer import Renderer
from contextledger.application.summaries.compaction import Compactor
from contextledger.application.summaries.lineage import summary_texts
from contextledger.application.summaries.summary_worker import (
    SummaryWorker,
    WorkerSettings,
    run_async,
    run_in_thread,
)
from contextledger.domain.errors import SummarizerUnavailableError
from contextledger.domain.events import SummaryAttemptFailed, SummaryRecorded
from contextledger.projections.presets import PRESETS
from contextledger.projections.summary_requests import SummaryDraft, SummaryRequest
from contextledger.testing import CountingIds, FixedClock, ScriptedSummarizer

BUDGET = 6_000
AT_COMPACTION = PRESETS["threshold"]
"""The preset as shipped: a summary waits for the next compaction point (planned ahead to be ready)."""
POLICY = AT_COMPACTION.model_copy(
    update={
        "name": "threshold-on-arrival",
        "summary": AT_COMPACTION.summary.model_copy(update={"on_arrival": True}),
    }
)
"""The same rules, applying a summary as soon as it exists: what most tests here look at."""


def failing() -> ScriptedSummarizer:
    """A summarizer that is always unavailable (it records each request it was asked)."""
    return ScriptedSummarizer(SummarizerUnavailableError("model server down"), name="failing", config_sha="f")


class Gated:
    """Wraps a summarizer and blocks inside ``summarize`` until released."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.entered = threading.Event()
        self.release = threading.Event()

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def config_sha(self) -> str:
        return self.inner.config_sha

    def summarize(self, request: SummaryRequest) -> SummaryDraft:
        self.entered.set()
        assert self.release.wait(30), "the test never released the summarizer"
        return self.inner.summarize(request)


@pytest.fixture
def clock() -> FixedClock:
    """A clock the test moves by hand."""
    return FixedClock(step=timedelta(0))


@pytest.fixture
def setup(clock):
    """A tool-heavy session far over the budget, a renderer, a compactor."""
    ledger = contextledger.open_ledger("memory://", clock=clock, ids=CountingIds())
    session = ledger.start_session(
        system_prompt="You are a coding agent.",
        tools=[{"name": "read_file", "description": "read", "parameters": {"type": "object"}}],
    )
    ledger.add_user_message(session, "Fix the bug in src/app.py.\n- [ ] add a regression test")
    _turns(ledger, session, range(40))
    renderer = Renderer(ledger, tokenizer="heuristic")
    extractive = ExtractiveSummarizer(counter=renderer.counter)
    compactor = Compactor(
        ledger, renderer, summarizer=extractive.name, summarizer_config=extractive.config_sha
    )
    return ledger, session, renderer, compactor, extractive


def _turns(ledger, session, numbers) -> None:
    for i in numbers:
        ledger.add_assistant_message(
            session,
            f"I'll read module {i} because the bug may be there.",
            tool_calls=[{"id": f"c{i}", "name": "read_file", "arguments": {"path": f"src/mod{i}.py"}}],
        )
        ledger.add_tool_result(session, f"c{i}", f"def f{i}(): ...\n" * 120)


def _bytes(context) -> bytes:
    return msgspec.json.encode(context)


def test_a_dropped_span_is_planned_once_and_summarized_by_the_worker(setup):
    """The free reducers dropped history: one request, one artifact, applied as a summary block."""
    ledger, session, renderer, compactor, extractive = setup
    before = renderer.render(session, POLICY, budget=BUDGET)
    assert any(d.action == "dropped" for d in before.decisions)
    request = compactor.plan(session, POLICY, budget=BUDGET)
    assert request is not None
    assert request.covers_from == 2
    assert request.covers_through == max(d.last for d in before.decisions if d.action == "dropped")
    assert compactor.plan(session, POLICY, budget=BUDGET) is None  # one unfinished request at a time
    worker = SummaryWorker(ledger, renderer, extractive, worker_id="w1")
    assert worker.run_once() == 1
    assert worker.run_once() == 0
    [artifact] = SummaryStream(ledger.log, session).artifacts()
    assert artifact.request_id == request.request_id
    assert artifact.producer == "worker"
    text = ledger.text(artifact.content)
    newest = f"src/mod{(request.covers_through - 3) // 2}.py"  # turn i is at positions 3 + 2i, 4 + 2i
    assert artifact.fidelity is not None
    assert artifact.fidelity.missing  # 30+ files do not fit an 800-token summary: the loss is on record
    assert all(missing not in text for missing in artifact.fidelity.missing)
    assert "src/mod0.py" in artifact.fidelity.missing
    assert newest in text
    assert newest not in artifact.fidelity.missing
    assert 0 < artifact.fidelity.paths < 1
    assert artifact.produced_at == ledger.version(session) + 1  # no render already made can change
    assert renderer.render(session, POLICY, budget=BUDGET).summary_id is None
    ledger.add_user_message(session, "Any progress?")
    after = renderer.render(session, POLICY, budget=BUDGET)
    assert after.summary_id == artifact.summary_id
    assert after.messages[0].kind == "summary"
    assert "not the user's words" in after.messages[0].text
    assert "- [ ] add a regression test" in after.messages[0].text
    assert after.tokens <= after.budget


def test_render_never_waits_for_a_slow_summarizer_and_new_events_stay_visible(setup):
    """While the summarizer is stuck, renders use the fallback; events appended meanwhile are kept."""
    ledger, session, renderer, compactor, extractive = setup
    gated = Gated(extractive)
    compactor.plan(session, POLICY, budget=BUDGET)
    fallback = renderer.render(session, POLICY, budget=BUDGET)
    thread, stop = run_in_thread(SummaryWorker(ledger, renderer, gated, worker_id="slow"), poll=0.01)
    try:
        assert gated.entered.wait(30)
        during = renderer.render(session, POLICY, budget=BUDGET)  # returns while the summarizer is blocked
        assert during.summary_id is None
        assert _bytes(during) == _bytes(fallback)
        _turns(ledger, session, range(40, 42))  # appended while the summary is being made
        gated.release.set()
        for _ in range(3000):
            if SummaryStream(ledger.log, session).artifacts():
                break
            threading.Event().wait(0.01)
    finally:
        stop()
        thread.join(10)
    [artifact] = SummaryStream(ledger.log, session).artifacts()
    _turns(ledger, session, range(42, 43))
    after = renderer.render(session, POLICY, budget=BUDGET)
    assert after.summary_id == artifact.summary_id
    head = ledger.version(session)
    shown = {p for m in after.messages for p in m.sources}
    assert {head - 3, head - 2, head - 1, head} <= shown  # pairs appended during the call are verbatim
    assert artifact.covers_through < head - 5


def test_a_failing_summarizer_changes_nothing_and_is_retried_then_dead_lettered(setup, clock):
    """Failures record outcome events, leave every render byte-identical, back off, then dead-letter."""
    ledger, session, renderer, compactor, _ = setup
    before = renderer.render(session, POLICY, budget=BUDGET)
    request = compactor.plan(session, POLICY, budget=BUDGET)
    down = failing()
    settings = WorkerSettings(max_attempts=3, backoff=timedelta(seconds=10))
    worker = SummaryWorker(ledger, renderer, down, worker_id="w", settings=settings)
    assert worker.run_once() == 1
    assert worker.run_once() == 0  # waiting out the backoff
    clock.advance(seconds=11)
    assert worker.run_once() == 1
    clock.advance(seconds=21)
    assert worker.run_once() == 1
    clock.advance(days=1)
    assert worker.run_once() == 0  # dead-lettered: never tried again
    assert len(down.requests) == 3
    assert {(r.covers_from, r.covers_through) for r in down.requests} == {
        (request.covers_from, request.covers_through)
    }
    failures = [
        r.event
        for r in SummaryStream(ledger.log, session).events()
        if isinstance(r.event, SummaryAttemptFailed)
    ]
    assert [f.attempt for f in failures] == [1, 2, 3]
    assert [f.dead_lettered for f in failures] == [False, False, True]
    assert failures[0].error_type == "SummarizerUnavailableError"
    status = SummaryStream(ledger.log, session).requests()[request.request_id]
    assert status.status(clock.now()) == "dead"
    assert not SummaryStream(ledger.log, session).artifacts()
    assert _bytes(Renderer(ledger, tokenizer="heuristic").render(session, POLICY, budget=BUDGET)) == _bytes(
        before
    )


@pytest.mark.parametrize(
    "answer", ["", "  \n ", "## Session Summary\n### Original Task\n[task]\n### Pending Work\n- [ ]\n(none)"]
)
def test_a_summary_that_says_nothing_is_never_applied(setup, clock, answer):
    """A summarizer that answers with nothing, or the template's headings alone, changes nothing.

    Any summarizer, not only the HTTP ones: the worker records ``SummaryRejectedError``, retries after
    its backoff and applies no artifact; every render stays byte-identical.
    """
    ledger, session, renderer, compactor, _ = setup
    before = renderer.render(session, POLICY, budget=BUDGET)
    compactor.plan(session, POLICY, budget=BUDGET)
    empty = ScriptedSummarizer(answer, name="empty", config_sha="e")
    worker = SummaryWorker(ledger, renderer, empty, worker_id="w")
    assert worker.run_once() == 1
    assert worker.run_once() == 0  # waiting out the backoff
    clock.advance(seconds=11)
    assert worker.run_once() == 1  # retried
    stream = SummaryStream(ledger.log, session)
    failures = [r.event for r in stream.events() if isinstance(r.event, SummaryAttemptFailed)]
    assert [(f.attempt, f.error_type, f.dead_lettered) for f in failures] == [
        (1, "SummaryRejectedError", False),
        (2, "SummaryRejectedError", False),
    ]
    assert len(empty.requests) == 2
    assert stream.artifacts() == []
    after = Renderer(ledger, tokenizer="heuristic").render(session, POLICY, budget=BUDGET)
    assert _bytes(after) == _bytes(before)


def test_two_workers_store_one_artifact_per_request(setup):
    """Both may run the request; the artifact's idempotency key keeps exactly one."""
    ledger, session, renderer, compactor, extractive = setup
    request = compactor.plan(session, POLICY, budget=BUDGET)
    status = SummaryStream(ledger.log, session).requests()[request.request_id]
    first = SummaryWorker(ledger, renderer, extractive, worker_id="a")
    second = SummaryWorker(ledger, renderer, extractive, worker_id="b")
    outcome = first.process(session, status)
    assert isinstance(outcome, SummaryRecorded)
    assert second.process(session, status) is None  # the request is done
    assert len(SummaryStream(ledger.log, session).artifacts()) == 1


def test_replay_with_recorded_artifacts_is_byte_identical(setup):
    """A fresh renderer folding the log and the recorded artifacts renders every position identically."""
    ledger, session, renderer, compactor, extractive = setup
    worker = SummaryWorker(ledger, renderer, extractive, worker_id="w")
    seen: dict[int, bytes] = {}
    for batch in range(3):
        compactor.plan(session, POLICY, budget=BUDGET)
        worker.run_once()
        _turns(ledger, session, range(100 + 10 * batch, 110 + 10 * batch))
        head = ledger.version(session)
        seen[head] = _bytes(renderer.render(session, POLICY, budget=BUDGET))
    assert len(SummaryStream(ledger.log, session).artifacts()) >= 2
    fresh = Renderer(ledger, tokenizer="heuristic")
    for position, expected in seen.items():
        assert _bytes(fresh.render(session, POLICY, budget=BUDGET, at=position)) == expected


def test_round_two_integrates_round_one_without_rereading_it(setup):
    """The second request names the first artifact; its entries start after the first one's span."""
    ledger, session, renderer, compactor, extractive = setup
    worker = SummaryWorker(ledger, renderer, extractive, worker_id="w")
    compactor.plan(session, POLICY, budget=BUDGET)
    worker.run_once()
    [first] = SummaryStream(ledger.log, session).artifacts()
    _turns(ledger, session, range(200, 240))
    second_request = compactor.plan(session, POLICY, budget=BUDGET)
    assert second_request is not None
    assert second_request.previous_summary_id == first.summary_id
    assert second_request.round == 2
    seen: list[SummaryRequest] = []

    class Spy:
        name = extractive.name
        config_sha = extractive.config_sha

        def summarize(self, request):
            seen.append(request)
            return extractive.summarize(request)

    SummaryWorker(ledger, renderer, Spy(), worker_id="w").run_once()
    [request] = seen
    assert request.previous == ledger.text(first.content)
    assert min(e.position for e in request.entries) == first.covers_through + 1
    second = SummaryStream(ledger.log, session).artifacts()[-1]
    assert second.round == 2
    assert "Fix the bug in src/app.py." in ledger.text(second.content)
    # its fidelity is of the events it read, and the listing says so (it read as of the whole span)
    texts = {t.summary_id: t for t in summary_texts(ledger, session)}
    assert texts[first.summary_id].measured_from == first.covers_from
    assert texts[second.summary_id].measured_from == first.covers_through + 1 > second.covers_from


def test_callbacks_run_before_and_after_each_compaction(setup):
    """Seed 002's hooks: before with the request, after with the artifact (or the failure)."""
    ledger, session, renderer, compactor, extractive = setup
    calls: list[tuple[str, str, str]] = []

    class Hooks:
        def before_compaction(self, request):
            calls.append(("before", request.request_id, ""))

        def after_compaction(self, request, outcome):
            calls.append(("after", request.request_id, type(outcome).__name__))

    request = compactor.plan(session, POLICY, budget=BUDGET)
    SummaryWorker(ledger, renderer, extractive, worker_id="w", callbacks=[Hooks()]).run_once()
    assert calls == [("before", request.request_id, ""), ("after", request.request_id, "SummaryRecorded")]


def test_a_reported_overflow_forces_a_tighter_compaction(setup):
    """The provider refused the context: the overflow is recorded and a request cuts deeper."""
    ledger, session, _, compactor, _ = setup
    threshold = compactor.plan(session, POLICY, budget=BUDGET)
    stream = SummaryStream(ledger.log, session)
    ledger.log.append(  # settle the threshold request so a new one may be planned
        stream.stream_id,
        ledger.log.version(stream.stream_id),
        [
            SummaryAttemptFailed(
                request_id=threshold.request_id,
                attempt=1,
                worker="t",
                error_type="X",
                message="x",
                dead_lettered=True,
            )
        ],
    )
    forced = compactor.report_overflow(session, POLICY, budget=BUDGET, limit_tokens=6_000, sent_tokens=6_400)
    assert forced is not None
    assert forced.trigger == "overflow"
    assert forced.covers_through > threshold.covers_through
    assert forced.target_tokens < threshold.target_tokens
    [overflow] = stream.overflows()
    assert (overflow.limit_tokens, overflow.sent_tokens) == (6_000, 6_400)


@pytest.mark.parametrize(("policy", "budget"), [("no-such-preset", BUDGET), (POLICY, -5)])
def test_an_overflow_report_with_a_bad_policy_or_budget_writes_nothing(setup, policy, budget):
    """The report was stored before the policy and budget were checked: the refusal left it written."""
    ledger, session, _, compactor, _ = setup
    stream = SummaryStream(ledger.log, session)
    with pytest.raises(contextledger.ConfigError):
        compactor.report_overflow(session, policy, budget=budget, limit_tokens=6_000, sent_tokens=6_400)
    assert stream.events() == []


def test_the_worker_runs_as_an_asyncio_task(setup):
    """run_async serves requests without blocking the event loop, and stops when asked."""
    ledger, session, renderer, compactor, extractive = setup
    compactor.plan(session, POLICY, budget=BUDGET)
    worker = SummaryWorker(ledger, renderer, extractive, worker_id="aio")

    async def main() -> int:
        stop = asyncio.Event()
        task = asyncio.create_task(run_async(worker, stop, poll=0.01))
        ticks = 0
        while not SummaryStream(ledger.log, session).artifacts():
            ticks += 1
            await asyncio.sleep(0.01)
        stop.set()
        await task
        return ticks

    asyncio.run(main())
    assert len(SummaryStream(ledger.log, session).artifacts()) == 1


def test_an_artifact_made_for_an_older_state_is_never_applied(setup):
    """A request planned before a wider summary took effect finishes late: its narrower artifact is unused."""
    ledger, session, renderer, compactor, extractive = setup
    request = compactor.plan(session, POLICY, budget=BUDGET)
    head = ledger.version(session)
    wider = ledger.record_summary(
        session,
        covers_from=2,
        covers_through=head - 2,
        text="## Session Summary\n- wider, recorded by the caller",
    )
    ledger.add_user_message(session, "next")
    assert renderer.render(session, POLICY, budget=BUDGET).summary_id == wider.summary_id
    status = SummaryStream(ledger.log, session).requests()[request.request_id]
    late = SummaryWorker(ledger, renderer, extractive, worker_id="late").process(session, status)
    assert isinstance(late, SummaryRecorded)
    assert late.covers_through < wider.covers_through
    ledger.add_user_message(session, "and next")
    assert renderer.render(session, POLICY, budget=BUDGET).summary_id == wider.summary_id


def test_another_policy_reuses_an_artifact_of_the_same_span_and_config(setup):
    """A second policy planning the same span with the same summarizer config requests nothing new."""
    ledger, session, renderer, compactor, extractive = setup
    first = compactor.plan(session, POLICY, budget=BUDGET)
    SummaryWorker(ledger, renderer, extractive, worker_id="w").run_once()
    twin = POLICY.model_copy(update={"name": "threshold-copy", "description": "same rules"})
    assert compactor.plan(session, twin, budget=BUDGET) is None  # the artifact of that span is reused
    assert len(SummaryStream(ledger.log, session).requests()) == 1
    other = Compactor(ledger, renderer, summarizer="other", summarizer_config="another-config")
    second = other.plan(session, twin, budget=BUDGET)
    assert second is not None  # another summarizer config: a new request
    assert (second.covers_from, second.covers_through) == (first.covers_from, first.covers_through)


def test_at_compaction_points_a_summary_planned_ahead_swaps_in_with_the_drop(setup):
    """The shipped presets: the next span is requested before the compaction point, then one prefix change."""
    ledger, session, renderer, compactor, extractive = setup
    worker = SummaryWorker(ledger, renderer, extractive, worker_id="w")
    prompts = []
    for turn in range(40, 120):
        _turns(ledger, session, [turn])
        prompts.append(renderer.render(session, AT_COMPACTION, budget=BUDGET))
        compactor.plan(session, AT_COMPACTION, budget=BUDGET)
        worker.run_once()
    shown = [p.summary_id for p in prompts]
    assert any(shown)
    changes = sum(
        1
        for before, after in itertools.pairwise(prompts)
        if after.messages[: before.stable_prefix] != before.messages[: before.stable_prefix]
    )
    swaps = sum(1 for a, b in itertools.pairwise(shown) if a != b)
    assert swaps >= 2
    assert changes <= swaps + 1  # each summary arrives at a compaction point, not as a change of its own
    assert all(p.tokens <= p.budget for p in prompts)


def test_a_worker_pass_reads_only_the_summary_streams_that_exist(setup):
    """With 30 quiet sessions beside it, a pass reads one summary stream; a later request is found too."""
    ledger, session, renderer, compactor, extractive = setup
    for number in range(30):
        quiet = ledger.start_session(system_prompt=f"quiet {number}")
        ledger.add_user_message(quiet, "nothing to summarize here")
    assert compactor.plan(session, POLICY, budget=BUDGET) is not None
    worker = SummaryWorker(ledger, renderer, extractive, worker_id="w")
    reads: list[str] = []
    inner = ledger.log.read

    def spy(stream_id, **kwargs):  # type: ignore[no-untyped-def]
        reads.append(stream_id)
        return inner(stream_id, **kwargs)

    ledger.log.read = spy  # type: ignore[method-assign]
    statuses = worker.requests()
    assert [s for s, _ in statuses] == [session]
    assert [r for r in reads if r.endswith("::summaries")] == [f"{session}::summaries"]
    other = ledger.start_session(system_prompt="a late one")
    _turns(ledger, other, range(40))
    assert compactor.plan(other, POLICY, budget=BUDGET) is not None
    assert {s for s, _ in worker.requests()} == {session, other}


def test_a_worker_pass_skips_the_sessions_whose_requests_are_all_done(setup):
    """A pass after the work is done reads no summary stream; a new request in that session is still taken.

    Every pass read every session's summary stream, done or not: with many sessions in one ledger, a
    worker polling for work spent its time re-reading finished ones.
    """
    ledger, session, renderer, compactor, extractive = setup
    done = []
    for number in range(5):
        other = ledger.start_session(system_prompt=f"busy {number}")
        ledger.add_user_message(other, "Fix it")
        _turns(ledger, other, range(40))
        assert compactor.plan(other, POLICY, budget=BUDGET) is not None
        done.append(other)
    worker = SummaryWorker(ledger, renderer, extractive, worker_id="w")
    assert worker.run_once() == 5
    assert worker.run_once() == 0  # reads the five streams its own attempts wrote to, and finds them done
    reads: list[str] = []
    inner = ledger.log.read

    def spy(stream_id, **kwargs):  # type: ignore[no-untyped-def]
        reads.append(stream_id)
        return inner(stream_id, **kwargs)

    ledger.log.read = spy  # type: ignore[method-assign]
    assert worker.run_once() == 0
    assert [r for r in reads if r.endswith("::summaries")] == []
    assert compactor.plan(session, POLICY, budget=BUDGET) is not None
    assert worker.run_once() == 1
    assert {r for r in reads if r.endswith("::summaries")} == {f"{session}::summaries"}
    assert len(SummaryStream(ledger.log, session).artifacts()) == 1
    assert {s for s, _ in worker.requests()} == {session, *done}  # the listing still reads every stream
