"""Smaller defects of issue 21: each a typed error (of the one tree) or a fix; nothing written on refusal."""

from __future__ import annotations

import sys
from pathlib import Path

import contextledger
import pydantic
import pytest
from contextledger.adapters.summarizers.extractive import ExtractiveSummarizer
from contextledger.application.kernel.summary_log import SummaryStream
from contextledger.application.render.renderer import Renderer
from contextledger.application.summaries.compaction import Compactor
from contextledger.application.summaries.summary_worker import SummaryWorker
from contextledger.domain.errors import (
    ConfigError,
    ContextLedgerError,
    IdempotencyKeyReusedError,
    InvalidMessageError,
)
from contextledger.domain.limits import MAX_SESSION_ID_CHARS, MAX_TOKENS
from contextledger.projections.budget import Budget
from contextledger.projections.policy import Policy

sys.path.insert(0, str(Path(__file__).parents[1] / "agent"))
from test_agent_loop import OPENAI_TOOL, chat_completion

BAD_IDS = [5, 5.0, None, b"bytes", ["s"], {"s": 1}]


@pytest.mark.parametrize("bad", BAD_IDS, ids=repr)
def test_a_non_string_session_id_is_a_typed_error_everywhere(ledger, bad):
    """Reads, appends, forks, pins and renders by a non-text session id raise InvalidMessageError."""
    calls = [
        lambda: ledger.add_user_message(bad, "hi"),
        lambda: ledger.events(bad),
        lambda: ledger.version(bad),
        lambda: ledger.fork(bad, at=1),
        lambda: ledger.pin(bad, 1),
        lambda: ledger.summaries(bad),
        lambda: Renderer(ledger, tokenizer="heuristic").render(bad, "default"),
    ]
    for call in calls:
        with pytest.raises(InvalidMessageError):
            call()


@pytest.mark.parametrize(
    "fields",
    [
        {"tools": "abc"},
        {"tools": {"name": "run"}},
        {"tools": [5]},
        {"tools": 7},
        {"system_prompt": 5},
        {"system_prompt": None},
        {"model": 5},
        {"metadata": ["a"]},
    ],
    ids=repr,
)
def test_ill_typed_session_fields_are_typed_errors_and_write_nothing(ledger, fields):
    """tools="abc" (a ValueError before), system_prompt=5 (accepted before): InvalidMessageError now."""
    before = len(ledger.sessions())
    with pytest.raises(InvalidMessageError):
        ledger.start_session(session_id="s1", **({"system_prompt": "x"} | fields))
    assert len(ledger.sessions()) == before


def test_tool_calls_given_as_text_are_a_typed_error(ledger):
    """An assistant message whose tool_calls is a string is refused, typed."""
    session = ledger.start_session(system_prompt="x")
    with pytest.raises(InvalidMessageError):
        ledger.add_assistant_message(session, "", tool_calls="abc")


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_huge_session_id_is_bad_input_with_a_short_message(backend, sqlite_url, request):
    """A 1 MB session id: InvalidMessageError (not StoreUnavailableError) whose message stays short."""
    url = sqlite_url if backend == "sqlite" else request.getfixturevalue("pg_url")
    huge = "s" * 1_000_000
    with contextledger.open_ledger(url) as ledger:
        for call in (
            lambda: ledger.start_session(session_id=huge, system_prompt="x"),
            lambda: ledger.add_user_message(huge, "hi"),
            lambda: ledger.events(huge),
        ):
            with pytest.raises(InvalidMessageError) as caught:
                call()
            assert len(str(caught.value)) < 300
        ledger.start_session(session_id="s" * MAX_SESSION_ID_CHARS, system_prompt="x")  # the limit itself
        assert [s.session_id for s in ledger.sessions()] == ["s" * MAX_SESSION_ID_CHARS]


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres"])
def test_reusing_an_idempotency_key_for_other_content_is_refused_naming_the_key(backend, sqlite_url, request):
    """Same key and content: a replay. Same key, other content: IdempotencyKeyReusedError, nothing written."""
    url = {"memory": "memory://", "sqlite": sqlite_url}.get(backend) or request.getfixturevalue("pg_url")
    with contextledger.open_ledger(url) as ledger:
        session = ledger.start_session(system_prompt="x")
        first = ledger.add_user_message(session, "deploy to staging", idempotency_key="turn-7")
        assert ledger.add_user_message(session, "deploy to staging", idempotency_key="turn-7") == first
        with pytest.raises(IdempotencyKeyReusedError, match="turn-7"):
            ledger.add_user_message(session, "deploy to PRODUCTION", idempotency_key="turn-7")
        assert [ledger.text(r.event.content) for r in ledger.events(session)[1:]] == ["deploy to staging"]
        started = ledger.start_session(system_prompt="a", idempotency_key="start-1")
        assert ledger.start_session(system_prompt="a", idempotency_key="start-1") == started
        with pytest.raises(IdempotencyKeyReusedError, match="start-1"):
            ledger.start_session(system_prompt="b", idempotency_key="start-1")
        with pytest.raises(IdempotencyKeyReusedError):
            ledger.start_sessions([{"system_prompt": "c", "idempotency_key": "start-1"}])


def test_record_response_twice_never_returns_calls_it_did_not_store(ledger):
    """A second, different reply for one call id is refused; the stored calls still take their results."""
    agent = contextledger.AgentContext.start(
        ledger, tools=[OPENAI_TOOL], messages=[{"role": "user", "content": "x"}]
    )
    request = agent.request()
    stored = agent.record_response(
        request.call_id, chat_completion(None, [("c1", "read_file", {"path": "a"})])
    )
    with pytest.raises(IdempotencyKeyReusedError):
        agent.record_response(request.call_id, chat_completion(None, [("c2", "read_file", {"path": "b"})]))
    assert [c.id for c in stored] == ["c1"]
    assert (
        agent.record_response(request.call_id, chat_completion(None, [("c1", "read_file", {"path": "a"})]))
        == stored
    )
    agent.record_tool_result("c1", "contents of a")


def test_run_once_counts_only_requests_this_worker_processed(ledger):
    """A request another worker took between the listing and the attempt is not counted (was: counted)."""
    session = ledger.start_session(system_prompt="agent")
    ledger.add_user_message(session, "Fix src/app.py")
    for i in range(30):
        ledger.add_assistant_message(session, f"step {i} " + "word " * 120)
        ledger.add_user_message(session, f"go on {i}")
    renderer = Renderer(ledger, tokenizer="heuristic")
    summarizer = ExtractiveSummarizer(counter=renderer.counter)
    compactor = Compactor(
        ledger, renderer, summarizer=summarizer.name, summarizer_config=summarizer.config_sha
    )
    assert compactor.plan(session, "threshold", budget=3_000) is not None
    slow = SummaryWorker(ledger, renderer, summarizer, worker_id="slow")
    listed = slow.requests()  # the slow worker lists the request as open ...
    assert (
        SummaryWorker(ledger, renderer, summarizer, worker_id="fast").run_once() == 1
    )  # ... a faster one takes it
    slow.requests = lambda: listed  # type: ignore[method-assign]
    assert slow.run_once() == 0
    assert len(SummaryStream(ledger.log, session).artifacts()) == 1


@pytest.mark.parametrize(
    "field", ["total", "output_reserve", "safety_margin", "injection_reserve", "headroom"]
)
def test_policy_budgets_have_an_upper_bound(field):
    """A budget past MAX_TOKENS (a typo, an overflow) is refused naming the field (Budget: ConfigError)."""
    big = {"total": MAX_TOKENS + 1} if field == "total" else {"total": 200_000, field: MAX_TOKENS + 1}
    with pytest.raises(ConfigError, match=field):
        Budget(**(Policy().budget.model_dump() | big))
    with pytest.raises(pydantic.ValidationError, match=field):
        Policy(budget=big)
    Policy(budget={"total": MAX_TOKENS})


def test_a_render_budget_has_an_upper_bound(ledger):
    """render(budget=10**30) is a ConfigError, not a render under an absurd limit."""
    session = ledger.start_session(system_prompt="x")
    ledger.add_user_message(session, "hi")
    renderer = Renderer(ledger, tokenizer="heuristic")
    with pytest.raises(ConfigError):
        renderer.render(session, "default", budget=10**30)
    assert renderer.render(session, "default", budget=1_000_000).budget == 1_000_000


def test_every_refusal_here_is_in_the_error_tree():
    """The new error is part of the one tree and public."""
    assert issubclass(IdempotencyKeyReusedError, ContextLedgerError)
    assert contextledger.IdempotencyKeyReusedError is IdempotencyKeyReusedError


def test_a_message_with_empty_content_parts_is_a_typed_error(ledger):
    """append({"role": "user", "content": []}) holds nothing: InvalidMessageError, not an IndexError.

    Found by the long fuzz (tests/reliability/test_fuzz.py, 10,000 cases); nothing is written.
    """
    session = ledger.start_session(system_prompt="x")
    with pytest.raises(contextledger.InvalidMessageError, match="nothing to append"):
        ledger.append(session, {"role": "user", "content": []})
    assert ledger.version(session) == 1


@pytest.mark.parametrize("meta", [[None], [""], "text", 5])
def test_an_assistant_message_with_parts_and_a_non_object_meta_is_a_typed_error(ledger, meta):
    """Assistant content parts with meta=[None] raised TypeError/ValueError: InvalidMessageError now.

    Found by the fuzz (tests/reliability/test_fuzz.py); nothing is written.
    """
    session = ledger.start_session(system_prompt="x")
    with pytest.raises(contextledger.InvalidMessageError, match="meta"):
        ledger.append(session, {"role": "assistant", "content": [], "meta": meta})
    assert ledger.version(session) == 1


def test_a_pin_retried_with_its_key_is_a_replay_and_new_content_is_refused():
    """The README's retry recipe holds for pins: the same pin again under its key stores nothing.

    A pin's restore meta holds tuples when drafted and lists once read back from the log, so the retry
    compared unequal and was refused as ``IdempotencyKeyReusedError``.
    """
    with contextledger.open_ledger("memory://") as ledger:
        session = ledger.start_session(system_prompt="x")
        ledger.add_user_message(session, "hi")
        first = ledger.pin(session, 2, reason="keep", idempotency_key="pin-1")
        assert ledger.pin(session, 2, reason="keep", idempotency_key="pin-1") == first
        assert ledger.version(session) == first
        with pytest.raises(contextledger.IdempotencyKeyReusedError):
            ledger.pin(session, 2, reason="another reason", idempotency_key="pin-1")
        assert ledger.version(session) == first


@pytest.mark.parametrize("version", ["3", -1, 1.0, True, 2**80])
def test_an_expected_version_of_the_wrong_type_is_invalid_input_not_a_lost_race(version):
    """``ConcurrencyConflictError`` says "reload and retry": for a caller's typo, a retry loop spun on it."""
    with contextledger.open_ledger("memory://") as ledger:
        session = ledger.start_session(system_prompt="x")
        with pytest.raises(contextledger.InvalidMessageError, match="expected_version"):
            ledger.append(session, {"role": "user", "content": "x"}, expected_version=version)
        ledger.add_user_message(session, "a message to pin")  # only messages are pinned
        with pytest.raises(contextledger.InvalidMessageError, match="expected_version"):
            ledger.pin(session, 2, expected_version=version)
        assert ledger.version(session) == 2
        assert ledger.append(session, {"role": "user", "content": "x"}, expected_version=2) == 3


_BAD_ARGUMENTS = {
    "append_many(None)": lambda ledger, s: ledger.append_many(s, None),
    "pin('2')": lambda ledger, s: ledger.pin(s, "2"),
    "pin(None)": lambda ledger, s: ledger.pin(s, None),
    "unpin('2')": lambda ledger, s: ledger.unpin(s, "2"),
    "pin_span('1', '3')": lambda ledger, s: ledger.pin_span(s, "1", "3"),
    "unpin_span(1, 2.0)": lambda ledger, s: ledger.unpin_span(s, 1, 2.0),
    "fork('3')": lambda ledger, s: ledger.fork(s, "3"),
    "fork(None)": lambda ledger, s: ledger.fork(s, None),
    "events(after='1')": lambda ledger, s: ledger.events(s, after="1"),
    "events(upto=-1)": lambda ledger, s: ledger.events(s, upto=-1),
    "text('abc')": lambda ledger, s: ledger.text("abc"),
    "Renderer(tokenizer=None)": lambda ledger, s: Renderer(ledger, tokenizer=None),
}


@pytest.mark.parametrize("case", sorted(_BAD_ARGUMENTS))
def test_an_argument_of_the_wrong_type_is_an_error_of_the_tree_and_writes_nothing(case):
    """Each raised ``TypeError`` or ``AttributeError`` from inside before (found by a probe of the API)."""
    with contextledger.open_ledger("memory://") as ledger:
        session = ledger.start_session(system_prompt="x")
        ledger.add_user_message(session, "hi")
        with pytest.raises(ContextLedgerError):
            _BAD_ARGUMENTS[case](ledger, session)  # type: ignore[no-untyped-call]
        assert ledger.version(session) == 2
        assert len(list(ledger.sessions())) == 1
