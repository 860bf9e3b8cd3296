"""``would_quote`` is exact when it says no: such an event gives the card nothing it could quote."""

from __future__ import annotations

from pathlib import Path

import contextledger
import pytest
from contextledger.adapters.importers.service import import_file
from contextledger.domain.content import InlineText
from contextledger.domain.events import ToolResultRecorded
from contextledger.projections.card_state import CardState, observe, would_quote

TRANSCRIPTS = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts"
FILES = sorted(p for p in TRANSCRIPTS.iterdir() if "__" in p.name)


def _quotable_parts(card: CardState) -> tuple[object, ...]:
    """Everything in the card's state whose text a card shows (all but the results' positions and tools)."""
    return (
        list(card.users),
        card.todo,
        dict(card.changed),
        dict(card.read),
        list(card.decisions),
        list(card.errors),
        card.open_error,
    )


@pytest.mark.parametrize("path", FILES, ids=[p.name.split("__")[0] + "/" + p.stem[-12:] for p in FILES])
def test_an_event_the_card_would_not_quote_leaves_its_quotable_state_as_it_was(path: Path) -> None:
    """Over a real session: an event ``would_quote`` rules out changes no quotable part of the card state."""
    ruled_out = quoted = 0
    with contextledger.open_ledger("memory://") as ledger:
        assert import_file(ledger, path).ok
        for info in ledger.sessions():
            card = CardState()
            for recorded in ledger.events(info.session_id):
                event = recorded.event
                content = getattr(event, "content", None)
                text = ledger.text(content) if content is not None else ""
                before = _quotable_parts(card)
                observe(card, recorded.position, event, text)
                if would_quote(event, text):
                    quoted += 1
                else:
                    ruled_out += 1
                    assert _quotable_parts(card) == before, (recorded.position, type(event).__name__)
    assert ruled_out > 0
    assert quoted > 0


def test_a_failed_tool_result_may_be_quoted_and_a_passing_one_may_not() -> None:
    """The error rule is the card's: flagged failed, or its first 200 characters report an error."""

    def result(text: str, *, failed: bool = False) -> ToolResultRecorded:
        return ToolResultRecorded(
            call_id="c1", tool_name="bash", content=InlineText(text=text), is_error=failed
        )

    assert would_quote(result("timed out", failed=True), "timed out")
    assert would_quote(
        result("Traceback (most recent call last):\n  x"), "Traceback (most recent call last):\n  x"
    )
    assert not would_quote(result("all 12 tests passed"), "all 12 tests passed")
