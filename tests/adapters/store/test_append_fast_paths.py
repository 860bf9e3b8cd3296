"""Batched appends' fast paths store what the definitions they replace store, byte for byte."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import contextledger
import msgspec
import pytest
from contextledger.adapters.store.batch import first_positions
from contextledger.adapters.store.mapper import _DIRECT, MsgspecMapper, _stored_event
from contextledger.application.kernel.drafting import EventDrafter
from contextledger.application.kernel.messages import ToolResult, UserMessage
from contextledger.domain.content import InlineText, content_address
from contextledger.domain.errors import InvalidMessageError
from contextledger.domain.events import UserMessageAdded
from contextledger.testing import CountingIds, FixedClock
from eventsourcing.persistence import StoredEvent
from hypothesis import given, settings
from hypothesis import strategies as st


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(min_value=1, max_value=50)), max_size=12
    )
)
def test_first_positions_equal_the_least_position_of_each_stream(rows: list[tuple[str, int]]) -> None:
    """The rows' first position per stream is the least position each stream has among them."""
    least = {s: min(v for t, v in rows if t == s) for s, _ in rows}
    assert first_positions([(s, v, "t", b"") for s, v in rows]) == least


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=40),
    threshold=st.integers(min_value=0, max_value=120),
)
def test_short_texts_stay_inline_as_by_their_bytes(text: str, threshold: int) -> None:
    """A text is inline exactly when its UTF-8 bytes fit the threshold; one with a lone surrogate has none.

    A lone surrogate has no UTF-8 form. A text too short to pass the threshold (four bytes a character) is
    inline whatever it holds, and the store's encoder refuses it; a longer one is measured, and refused here
    (an InvalidMessageError, nothing kept), where this test once counted its bytes with ``surrogatepass``.
    """
    blobs: dict[str, str] = {}
    drafter = EventDrafter(FixedClock(), threshold)
    if any(0xD800 <= ord(c) <= 0xDFFF for c in text) and len(text) * 4 > threshold:
        with pytest.raises(InvalidMessageError, match="valid UTF-8"):
            drafter.text(text, blobs)
        assert blobs == {}
        return
    stored = drafter.text(text, blobs)
    if len(text.encode("utf-8", "surrogatepass")) <= threshold:
        assert stored == InlineText(text)
        assert blobs == {}
    else:
        assert blobs == {content_address(text): text}


def _stored_rows(path: Path, messages: list[object]) -> list[tuple[str, int, str, bytes]]:
    """The event rows one append of ``messages`` stores in a new SQLite ledger (fixed clock and ids)."""
    url = f"sqlite:///{path}"
    with contextledger.open_ledger(url, clock=FixedClock(), ids=CountingIds()) as ledger:
        session_id = ledger.start_session(system_prompt="bytes")
        ledger.append_many(session_id, [{"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "name": "read", "arguments": "{}"}]}])  # fmt: skip
        ledger.append_many(session_id, messages)  # type: ignore[arg-type]
    with sqlite3.connect(path) as conn:
        return conn.execute(
            "SELECT originator_id, originator_version, topic, state FROM ledger_events ORDER BY rowid"
        ).fetchall()


def test_plain_dicts_store_the_bytes_of_validated_models(tmp_path: Path) -> None:
    """Plain dicts (fast path) and the models pydantic validates (full path) store identical rows."""
    dicts: list[object] = [
        {"role": "user", "content": "x" * 300},
        {"role": "tool", "call_id": "c1", "content": "ok"},
        {"role": "user", "content": "é" * 3000},  # inline at the default threshold only by its bytes
    ]
    models: list[object] = [
        UserMessage(content="x" * 300),
        ToolResult(call_id="c1", content="ok"),
        UserMessage(content="é" * 3000),
    ]
    assert _stored_rows(tmp_path / "dicts.db", dicts) == _stored_rows(tmp_path / "models.db", models)


@settings(max_examples=100, deadline=None)
@given(stream=st.text(max_size=5), position=st.integers(min_value=1), state=st.binary(max_size=8))
def test_stored_rows_equal_the_dataclass_built_rows(stream: str, position: int, state: bytes) -> None:
    """The mapper's rows equal, repr and hash as ``StoredEvent(...)`` built by its constructor."""
    assert _DIRECT  # the direct build is what runs here
    built = StoredEvent(originator_id=stream, originator_version=position, topic="t", state=state)
    direct = _stored_event(stream, position, "t", state)
    assert (direct, repr(direct), hash(direct)) == (built, repr(built), hash(built))
    assert type(direct) is StoredEvent


def test_mapper_rows_carry_id_position_topic_and_bytes() -> None:
    """``to_stored`` names the stream, position and topic, and holds the msgpack bytes of the event."""
    event = UserMessageAdded(content=InlineText("hi"))
    stored = MsgspecMapper().to_stored("s", 3, event)
    assert (stored.originator_id, stored.originator_version, stored.topic) == (
        "s",
        3,
        "contextledger/UserMessageAdded/v1",
    )
    assert stored.state == msgspec.msgpack.encode(event)
