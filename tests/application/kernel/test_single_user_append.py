"""ADR 0052: ``add_user_message`` of a ``str`` skips the model and stores what the model's append stores."""

from __future__ import annotations

from typing import Any

import contextledger
import pytest
from contextledger.application.kernel.messages import UserMessage
from contextledger.domain.errors import InvalidMessageError
from contextledger.testing import CountingIds, FixedClock
from hypothesis import given, settings
from hypothesis import strategies as st


def _stored(text: str, *, via_model: bool) -> list[Any]:
    """The events of a session after one user message, appended by text or as a validated model."""
    with contextledger.open_ledger("memory://", clock=FixedClock(), ids=CountingIds()) as ledger:
        session = ledger.start_session(system_prompt="s")
        if via_model:
            ledger.append(session, UserMessage(content=text))
        else:
            ledger.add_user_message(session, text)
        return [(r.position, r.event) for r in ledger.events(session)]


@settings(max_examples=150, deadline=None)
@given(text=st.one_of(st.text(max_size=40), st.text(min_size=2100, max_size=2200), st.just("x" * 9000)))
def test_a_user_text_stores_the_event_of_the_validated_model(text: str) -> None:
    """Same positions, same events (inline or a blob reference, clock reading, empty meta)."""
    assert _stored(text, via_model=False) == _stored(text, via_model=True)


@pytest.mark.parametrize("content", [7, None, ["a"], b"bytes", {"text": "t"}])
def test_content_that_is_not_text_is_refused_as_before(content: object) -> None:
    """Anything but text still goes through ``UserMessage`` and is refused typed, nothing stored."""
    with contextledger.open_ledger("memory://") as ledger:
        session = ledger.start_session(system_prompt="s")
        with pytest.raises(InvalidMessageError):
            ledger.add_user_message(session, content)  # type: ignore[arg-type]
        assert ledger.version(session) == 1


def test_a_str_subclass_takes_the_models_path() -> None:
    """A ``str`` subclass is validated by the model, as before (StrictStr accepts it)."""

    class Text(str):
        __slots__ = ()

    assert _stored(Text("hello"), via_model=False) == _stored("hello", via_model=True)
