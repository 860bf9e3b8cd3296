"""Batched appends (ADR 0045): plain messages draft as their models; the rules snapshot joins the append."""

from __future__ import annotations

import base64
import sqlite3
from pathlib import Path

import contextledger
import msgspec
import pytest
from contextledger.application.kernel.drafting import EventDrafter
from contextledger.application.kernel.messages import parse_for_append, parse_messages, plain_message
from contextledger.application.kernel.rules_cache import RULES_SNAPSHOT_EVERY
from contextledger.domain.errors import InvalidMessageError
from contextledger.domain.events import AssistantMessageAdded, ToolCall, ToolResultRecorded, UserMessageAdded
from contextledger.domain.session import SessionState
from contextledger.testing import CountingIds, FixedClock
from eventsourcing.persistence import StoredEvent
from hypothesis import given, settings
from hypothesis import strategies as st

_VALUES = st.one_of(st.text(max_size=12), st.just(""), st.integers(), st.none())


@st.composite
def _messages(draw: st.DrawFn) -> object:
    """Plain dicts, near misses (extra keys, wrong types, empty ids), models' shapes of every role."""
    role = draw(st.sampled_from(["user", "tool", "assistant"]))
    raw: dict[str, object] = {"role": role, "content": draw(st.one_of(st.text(max_size=12), _VALUES))}
    if role == "tool":
        raw["call_id"] = draw(st.one_of(st.sampled_from(["c1", "c2", "x", ""]), _VALUES))
    if role == "assistant":
        raw["tool_calls"] = [{"id": draw(st.sampled_from(["c1", "c2"])), "name": "run"}]
    for key in draw(st.lists(st.sampled_from(["meta", "at", "tool_name", "is_error"]), max_size=1)):
        raw[key] = draw(
            st.sampled_from([{"k": 1}, {"time": "unknown"}, "name", True, "2026-01-01T00:00:00+00:00"])
        )
    return raw


def _drafted(parsed: list[object]) -> list[object]:
    """Draft ``parsed`` after a state with call ``c1`` pending (a fixed clock: the same times each run)."""
    state = SessionState("s")
    state.version = 2
    state.calls.issue([("c1", "read")], 2)
    drafter = EventDrafter(FixedClock(), blob_threshold=8)  # a low threshold: some texts become blobs
    blobs: dict[str, str] = {}
    events = [drafter.event(m, state, {}, blobs) for m in parsed]  # type: ignore[arg-type]
    return [[msgspec.msgpack.encode(e) for e in events], events, blobs]


def _outcome(parse: object, messages: list[object]) -> object:
    """The drafted events (with their bytes and blobs) of ``messages`` parsed by ``parse``, or the error."""
    try:
        return _drafted(parse(messages))  # type: ignore[operator]
    except InvalidMessageError as error:
        return ("error", str(error))


def _by_models(messages: list[object]) -> list[object]:
    """The general path: every message validated into its model first."""
    return [one for raw in messages for one in parse_messages(raw)]


@settings(max_examples=400, deadline=None)
@given(messages=st.lists(_messages(), max_size=5))
def test_plain_messages_draft_the_events_of_their_models(messages: list[object]) -> None:
    """A batch drafts the same events, bytes, blobs and errors whether plain dicts build models or not."""
    assert _outcome(parse_for_append, messages) == _outcome(_by_models, messages)


@settings(max_examples=300, deadline=None)
@given(raw=_messages())
def test_a_plain_message_is_what_validation_keeps(raw: dict[str, object]) -> None:
    """``plain_message`` reads a dict exactly when validation keeps only its role, content and call id."""
    plain = plain_message(raw)
    if plain is None:
        return
    (model,) = parse_messages(dict(raw))
    assert plain == (model.role, model.content, getattr(model, "call_id", ""))
    assert model.model_fields_set == set(raw)


def _snapshot_row(path: Path, session: str) -> tuple[int, bytes] | None:
    """The rules snapshot row of ``session`` in the SQLite file, read with plain sqlite3."""
    with sqlite3.connect(path) as conn:
        row = conn.execute(
            "SELECT position, state FROM ledger_snapshots WHERE name = ?", (f"rules/v2/{session}",)
        ).fetchone()
    return None if row is None else (int(row[0]), bytes(row[1]))


def test_the_rules_snapshot_is_stored_by_the_append_itself(tmp_path: Path, monkeypatch) -> None:
    """On SQLite the snapshot joins the append's transaction: no separate ``save_snapshot`` write."""
    path = tmp_path / "l.db"
    with contextledger.open_ledger(f"sqlite:///{path}") as ledger:
        session = ledger.start_session()

        def refused(*_args: object) -> None:
            raise AssertionError("the rules snapshot was saved in a transaction of its own")

        monkeypatch.setattr(ledger.ports.snapshots, "save_snapshot", refused)
        monkeypatch.setattr(ledger.ports.log.recorder, "save_snapshot", refused)  # type: ignore[attr-defined]
        ledger.append_many(session, [{"role": "user", "content": "x"}] * RULES_SNAPSHOT_EVERY)
        state = ledger._rules.get(session)
        expected = (1 + RULES_SNAPSHOT_EVERY, msgspec.msgpack.encode(state.to_snapshot()))
    assert _snapshot_row(path, session) == expected


def test_a_refused_append_stores_no_snapshot(tmp_path: Path) -> None:
    """The snapshot is written only with the events: an append refused by the store leaves neither."""
    path = tmp_path / "l.db"
    url = f"sqlite:///{path}"
    with contextledger.open_ledger(url) as ledger, contextledger.open_ledger(url) as other:
        session = ledger.start_session()
        ledger.append_many(session, [{"role": "user", "content": "x"}] * (RULES_SNAPSHOT_EVERY - 3))
        other.append(session, {"role": "user", "content": "first"})  # the ledger's cached state is behind
        batch = [{"role": "user", "content": "y"}] * 2  # would reach the snapshot mark
        with pytest.raises(contextledger.ConcurrencyConflictError):
            ledger.append_many(session, batch, expected_version=RULES_SNAPSHOT_EVERY - 2)
        with pytest.raises(contextledger.InvalidMessageError):
            ledger.append_many(session, [{"role": "user", "content": "ok"}, {"role": "user", "content": 7}])
        assert ledger.version(session) == RULES_SNAPSHOT_EVERY - 1
        assert _snapshot_row(path, session) is None
        ledger.append_many(session, batch)
    stored = _snapshot_row(path, session)
    assert stored is not None
    assert stored[0] == RULES_SNAPSHOT_EVERY + 1


@pytest.mark.parametrize("backend", ["memory", "postgres"])
def test_a_store_without_joined_snapshots_saves_it_after_the_append(
    backend: str, request: pytest.FixtureRequest
) -> None:
    """Memory and PostgreSQL save the snapshot right after the append, at the same position."""
    url = "memory://" if backend == "memory" else request.getfixturevalue("pg_url")
    with contextledger.open_ledger(url) as ledger:
        session = ledger.start_session()
        ledger.append_many(session, [{"role": "user", "content": "x"}] * RULES_SNAPSHOT_EVERY)
        found = ledger.ports.snapshots.load_snapshot(f"rules/v2/{session}")
        assert found is not None
        assert found[0] == 1 + RULES_SNAPSHOT_EVERY
        assert msgspec.msgpack.decode(found[1])["version"] == 1 + RULES_SNAPSHOT_EVERY


def test_a_failed_snapshot_after_the_append_is_logged_not_raised(monkeypatch) -> None:
    """Where the snapshot is saved after the append, its failure leaves the stored append a success."""
    with contextledger.open_ledger("memory://", clock=FixedClock(), ids=CountingIds()) as ledger:
        session = ledger.start_session()

        def broken(*_args: object) -> None:
            raise contextledger.StoreUnavailableError("disk full")

        monkeypatch.setattr(ledger.ports.snapshots, "save_snapshot", broken)
        positions = ledger.append_many(session, [{"role": "user", "content": "x"}] * RULES_SNAPSHOT_EVERY)
        assert positions[-1] == ledger.version(session) == 1 + RULES_SNAPSHOT_EVERY


@st.composite
def _call_events(draw: st.DrawFn) -> list[object]:
    """Events that change the rules state: calls issued (ids reused once answered), results, user text."""
    events: list[object] = []
    pending: list[str] = []
    for _ in range(draw(st.integers(min_value=0, max_value=12))):
        kind = draw(st.sampled_from(["call", "result", "user"]))
        if kind == "call":
            free = [i for i in ("a", "b", "c") if i not in pending]
            if not free:
                continue
            call = draw(st.sampled_from(free))
            pending.append(call)
            events.append(AssistantMessageAdded(tool_calls=(ToolCall(id=call, name=f"t{call}"),)))
        elif kind == "result" and pending:
            call = pending.pop(draw(st.integers(min_value=0, max_value=len(pending) - 1)))
            events.append(ToolResultRecorded(call_id=call, tool_name="", content=None))  # type: ignore[arg-type]
        else:
            events.append(UserMessageAdded(content=None))  # type: ignore[arg-type]
    return events


@settings(max_examples=200, deadline=None)
@given(before=_call_events(), batch=_call_events())
def test_the_snapshot_after_an_append_is_the_state_it_leads_to(
    before: list[object], batch: list[object]
) -> None:
    """``snapshot_after`` encodes (and returns) the state the batch leads to; the state is left as it was."""
    from contextledger.application.kernel.rules_cache import RulesCache  # noqa: PLC0415

    with contextledger.open_ledger("memory://") as ledger:
        rules = RulesCache(ledger.log, ledger.ports.snapshots, 8)
    state = SessionState("s")
    state.version = 1
    for event in before:
        state.apply(event)  # type: ignore[arg-type]
    kept = state.to_snapshot()
    position = state.version + len(batch)
    rules._snapshot_at["s"] = position - RULES_SNAPSHOT_EVERY + 1
    assert rules.snapshot_after(state, batch) is None  # type: ignore[arg-type]
    rules._snapshot_at["s"] = position - RULES_SNAPSHOT_EVERY
    found = rules.snapshot_after(state, batch)  # type: ignore[arg-type]
    assert found is not None
    assert state.to_snapshot() == kept
    for event in batch:
        state.apply(event)  # type: ignore[arg-type]
    snapshot, after = found
    assert snapshot == ("rules/v2/s", position, msgspec.msgpack.encode(state.to_snapshot()))
    assert (after.session_id, after.to_snapshot(), after.pending_calls) == (
        "s",
        state.to_snapshot(),
        state.pending_calls,
    )


def _rows_or_error(build: object) -> object:
    """The rows ``build()`` returns as plain tuples, or the type and text of what it raised."""
    try:
        rows = build()  # type: ignore[operator]
    except (InvalidMessageError, TypeError, ValueError, OverflowError, msgspec.EncodeError) as error:
        return (type(error), str(error))
    return [r if type(r) is tuple else _fields(r) for r in rows]


def _fields(stored: StoredEvent) -> tuple[object, ...]:
    """A ``StoredEvent`` as the ``(stream, position, topic, state)`` row ``rows_many`` gives."""
    return (stored.originator_id, stored.originator_version, stored.topic, stored.state)


@settings(max_examples=200, deadline=None)
@given(
    metas=st.lists(
        st.one_of(
            st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
            st.integers(min_value=120, max_value=135).map(lambda depth: {"deep": _nested(depth)}),
            st.just({"o": object()}),  # cannot be encoded
        ),
        max_size=5,
    )
)
def test_a_batch_encodes_or_fails_as_its_events_one_by_one(metas: list[dict[str, object]]) -> None:
    """``to_stored_many`` and ``rows_many`` return the rows, or raise the first fault met, as one by one."""
    from contextledger.adapters.store.mapper import MsgspecMapper  # noqa: PLC0415

    mapper = MsgspecMapper()
    events = [UserMessageAdded(content=None, meta=meta) for meta in metas]  # type: ignore[arg-type]
    one_by_one = _rows_or_error(
        lambda: [mapper._checked_row("s", at, event) for at, event in enumerate(events, 3)]
    )
    assert _rows_or_error(lambda: mapper.to_stored_many("s", 3, events)) == one_by_one
    assert _rows_or_error(lambda: mapper.rows_many("s", 3, events)) == one_by_one


def _nested(depth: int) -> object:
    """A list ``depth`` levels deep."""
    value: object = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_an_encrypted_ledger_seals_the_snapshot_of_the_append(tmp_path: Path, monkeypatch) -> None:
    """The snapshot joining the append is sealed as ``save_snapshot`` seals it, and reads back."""
    monkeypatch.setenv("CIPHER_KEY", base64.b64encode(b"m" * 32).decode())
    path = tmp_path / "l.db"
    with contextledger.open_ledger(f"sqlite:///{path}") as ledger:
        session = ledger.start_session()
        ledger.append_many(session, [{"role": "user", "content": "x"}] * RULES_SNAPSHOT_EVERY)
        plain = msgspec.msgpack.encode(ledger._rules.get(session).to_snapshot())
    stored = _snapshot_row(path, session)
    assert stored is not None
    assert stored[0] == 1 + RULES_SNAPSHOT_EVERY
    assert plain not in stored[1]
    with contextledger.open_ledger(f"sqlite:///{path}") as ledger:
        found = ledger.ports.snapshots.load_snapshot(f"rules/v2/{session}")
    assert found == (1 + RULES_SNAPSHOT_EVERY, plain)
