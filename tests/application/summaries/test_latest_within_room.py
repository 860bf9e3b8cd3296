"""A summary the worker records must never make a session's later renders fail (ADR 0095)."""

from __future__ import annotations

from pathlib import Path

import contextledger
import pytest
from contextledger import ExtractiveSummarizer
from contextledger.adapters.importers.service import import_file
from contextledger.application.audit.session_replay import replay_calls
from contextledger.application.render.renderer import Renderer
from contextledger.domain.errors import PinnedOverBudgetError
from contextledger.projections.presets import get_preset

AIDER = (
    Path(__file__).resolve().parents[2] / "fixtures" / "transcripts" / "aider__afi-core.aider.chat.history.md"
)


def _replayed(policy: contextledger.Policy) -> tuple[contextledger.Ledger, str]:
    """An Aider session whose calls wait for results (pinned), replayed at 4,000 tokens with the worker."""
    source = contextledger.open_ledger("memory://")
    assert import_file(source, AIDER).ok
    [session] = [s.session_id for s in source.sessions() if s.session_id.startswith("aider-6-")]
    scratch = contextledger.open_ledger("memory://")
    for _ in replay_calls(
        source,
        session,
        scratch,
        policy,
        budget=4_000,
        make_summarizer=lambda c: ExtractiveSummarizer(counter=c),
    ):
        pass
    return scratch, session


def test_a_summary_larger_than_the_room_pins_leave_is_not_shown_and_every_render_fits():
    """A summary of 2-25 (689 tokens) arrived where pinned calls left 251: every later render failed.

    ``PinnedOverBudgetError: pinned items need 4438 tokens but the budget allows 4000``, though the
    same events without the summary fit; ``simulate`` stopped at that session. The latest summary that
    fits is shown instead, or none.
    """
    scratch, session = _replayed(get_preset("default"))
    renderer = Renderer(scratch)
    for at in range(2, scratch.version(session) + 1):
        context = renderer.render(session, get_preset("default"), at=at, budget=4_000)
        assert context.tokens <= 4_000


def test_without_the_field_the_summary_is_shown_and_the_render_fails_as_recorded_before():
    """Records made before ADR 0095 replay as they were: the field is off in a policy that lacks it."""
    before = get_preset("default").model_copy(
        update={"summary": get_preset("default").summary.model_copy(update={"latest_within_room": False})}
    )
    assert "latest_within_room" not in before.fingerprint()
    assert "latest_within_room" in get_preset("default").fingerprint()
    with pytest.raises(PinnedOverBudgetError):
        _replayed(before)
