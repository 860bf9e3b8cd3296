"""The plain-dict fast path of ``parse_messages`` builds exactly what pydantic's validation builds."""

from __future__ import annotations

import pytest
from contextledger.application.kernel.messages import _parse_one, parse_messages
from contextledger.application.kernel.wire_shapes import ledger_messages
from contextledger.domain.errors import InvalidMessageError
from hypothesis import given, settings
from hypothesis import strategies as st


class _Text(str):
    """A str subclass: not the fast path's exact ``str``."""

    __slots__ = ()


_VALUES = st.one_of(
    st.text(max_size=20),
    st.just(""),
    st.text(max_size=3).map(_Text),
    st.integers(),
    st.none(),
    st.lists(st.text(max_size=2), max_size=2),
)
_KEYS = st.sampled_from(["role", "content", "call_id", "meta", "at", "tool_name", "media", "extra"])


@st.composite
def _dicts(draw: st.DrawFn) -> dict[str, object]:
    """Dicts near the plain shapes: the exact ones, extra or missing keys, wrong types, other roles."""
    role = draw(st.sampled_from(["user", "tool", "assistant", "system", 7]))
    raw: dict[str, object] = {"role": role, "content": draw(_VALUES)}
    if role == "tool" or draw(st.booleans()):
        raw["call_id"] = draw(_VALUES)
    for key in draw(st.lists(_KEYS, max_size=2)):
        raw[key] = draw(st.one_of(_VALUES, st.dictionaries(st.text(max_size=2), st.integers(), max_size=1)))
    if draw(st.booleans()):
        raw.pop(draw(_KEYS), None)
    return raw


def _full_path(raw: object) -> list[object]:
    """``parse_messages`` as it was before the fast path: provider shapes, then pydantic validation."""
    return [_parse_one(m) for m in ledger_messages(raw)]


def _outcome(parse: object, raw: dict[str, object]) -> object:
    """The parsed messages with their fields set, or the error text."""
    try:
        parsed = parse(raw)  # type: ignore[operator]
    except InvalidMessageError as error:
        return ("error", str(error))
    messages = parsed if isinstance(parsed, list) else [parsed]
    return [(type(m), m, repr(m), m.model_fields_set, list(m.__dict__)) for m in messages]


@settings(max_examples=500, deadline=None)
@given(raw=_dicts())
def test_fast_path_equals_validation(raw: dict[str, object]) -> None:
    """Every dict parses as pydantic's validation parses it: same models, fields, fields set, errors."""
    assert _outcome(parse_messages, raw) == _outcome(_full_path, dict(raw))


@pytest.mark.parametrize(
    "raw",
    [
        {"role": "user", "content": "hello"},
        {"role": "tool", "call_id": "c1", "content": "ok"},
    ],
)
def test_plain_messages_are_independent_models(raw: dict[str, object]) -> None:
    """Two parses of one dict share no mutable state (each gets its own ``meta``), as validation gives."""
    first, second = parse_messages(raw)[0], parse_messages(raw)[0]
    assert first == second == _parse_one(raw)
    assert first.meta is not second.meta
    assert first.model_dump() == _parse_one(raw).model_dump()


def test_empty_call_id_is_still_refused() -> None:
    """A tool result with an empty call id takes the full path and is refused, typed."""
    with pytest.raises(InvalidMessageError, match="call_id"):
        parse_messages({"role": "tool", "call_id": "", "content": "x"})
