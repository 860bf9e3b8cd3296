"""A hypothesis fuzz of the public entry points and importers: a typed error or a result, nothing partial."""

from __future__ import annotations

import json
import os

import contextledger
from contextledger.domain.errors import ContextLedgerError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

CASES = 10_000 if os.environ.get("CONTEXTLEDGER_LONG") == "1" else 150
"""Examples per entry point: 150 in CI, 10,000 in the long mode."""

FUZZ = settings(
    max_examples=CASES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
anything = json_values | st.binary(max_size=20) | st.tuples(st.integers(), st.text(max_size=5))
message_like = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool", "system", "x", 5])},
    optional={
        "content": json_values,
        "tool_calls": json_values,
        "tool_call_id": json_values,
        "meta": json_values,
        "name": json_values,
    },
)


def _counts(ledger: contextledger.Ledger) -> list[tuple[str, int]]:
    return [(s.session_id, s.events) for s in ledger.sessions()]


def _typed_or_result(call, ledger: contextledger.Ledger) -> None:
    before = _counts(ledger)
    try:
        result = call()
    except ContextLedgerError:
        assert _counts(ledger) == before, "a refused call wrote something"
    else:
        if getattr(result, "error", None) is not None:  # an import reports its refusal instead of raising
            assert isinstance(result.error, ContextLedgerError)
            assert _counts(ledger) == before, "a refused import wrote something"


@FUZZ
@given(
    session_id=st.none() | anything,
    system_prompt=anything,
    model=st.none() | anything,
    tools=anything | st.lists(anything, max_size=3),
    metadata=st.none() | anything,
    messages=st.lists(message_like | anything, max_size=3),
    key=st.none() | anything,
)
def test_start_session_answers_typed(  # noqa: PLR0917 - hypothesis passes one argument per strategy
    ledger, session_id, system_prompt, model, tools, metadata, messages, key
):
    """start_session with any values: a session id or a ContextLedgerError with nothing written."""
    _typed_or_result(
        lambda: ledger.start_session(
            session_id=session_id,
            system_prompt=system_prompt,
            model=model,
            tools=tools,
            metadata=metadata,
            messages=messages,
            idempotency_key=key,
        ),
        ledger,
    )


@FUZZ
@given(
    session=st.sampled_from(["known", "unknown"]) | anything,
    message=message_like | anything,
    key=st.none() | anything,
)
def test_append_answers_typed(ledger, session, message, key):
    """Append with any message and id: positions or a ContextLedgerError with nothing written."""
    if "known" not in {s.session_id for s in ledger.sessions()}:
        ledger.start_session(session_id="known", system_prompt="s")
    _typed_or_result(lambda: ledger.append(session, message, idempotency_key=key), ledger)


@FUZZ
@given(
    content=st.text(max_size=60),
    calls=anything | st.lists(anything, max_size=3),
    result=anything,
)
def test_assistant_and_tool_helpers_answer_typed(ledger, content, calls, result):
    """add_assistant_message / add_tool_result with any calls and results: typed errors only."""
    if "h" not in {s.session_id for s in ledger.sessions()}:
        ledger.start_session(session_id="h", system_prompt="s")
    _typed_or_result(lambda: ledger.add_assistant_message("h", content, tool_calls=calls), ledger)
    _typed_or_result(lambda: ledger.add_tool_result("h", result, content), ledger)


@FUZZ
@given(document=json_values | st.lists(message_like, max_size=4), raw=st.binary(max_size=200))
def test_importers_answer_typed(ledger, tmp_path_factory, document, raw):
    """Any JSON document or bytes as a transcript file: sessions imported or a ContextLedgerError."""
    folder = tmp_path_factory.mktemp("fuzz")
    for name, data in (("doc.json", json.dumps(document).encode()), ("raw.jsonl", raw), ("raw.json", raw)):
        path = folder / name
        path.write_bytes(data)
        _typed_or_result(lambda path=path: contextledger.import_file(ledger, path), ledger)
