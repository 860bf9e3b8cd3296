"""Blue/green rebuilds in process: build beside the live version, compare, switch, refuse a stale config."""

from __future__ import annotations

import contextledger
import pytest
from contextledger.adapters.store.projections import RecorderProjections
from contextledger.application.rebuild.blue_green import active_state, build_version, compare_versions
from contextledger.application.rebuild.projection_runner import CONTEXT_VIEW
from contextledger.application.render.renderer import Renderer
from contextledger.projections.presets import get_preset

from tests.application.rebuild.conftest import rendered_differently


@pytest.fixture
def ledger(two_transcripts):
    """The SQLite ledger holding two real transcripts (``two_transcripts``)."""
    return two_transcripts


def test_a_candidate_is_compared_with_the_live_version_then_switched(ledger):
    """The comparison names the sessions whose renders differ and both token totals; switching serves it."""
    views = RecorderProjections(ledger.ports.log)
    live = build_version(ledger, views, views, policy=get_preset("default"), budget=16_000)
    views.activate(CONTEXT_VIEW, live.projection)
    alone = compare_versions(ledger, views, live.projection)
    assert alone.live == alone.candidate  # the version that serves, compared with itself
    assert alone.differing == []
    assert alone.candidate.sessions == 2
    candidate = build_version(ledger, views, views, policy=get_preset("threshold"), budget=16_000)
    comparison = compare_versions(ledger, views, candidate.projection)
    assert comparison.live is not None
    assert comparison.live.version == live.projection
    assert comparison.live.tokens == alone.candidate.tokens
    assert comparison.candidate.policy == "threshold"
    assert comparison.differing == rendered_differently(ledger, "default", "threshold")
    assert comparison.candidate.tokens != comparison.live.tokens
    assert views.active(CONTEXT_VIEW) == live.projection
    views.activate(CONTEXT_VIEW, candidate.projection)
    session_id = ledger.sessions()[0].session_id
    served = active_state(
        ledger, views, session_id, policy=get_preset("threshold"), policy_spec="threshold", budget=16_000
    )
    fresh = Renderer(ledger, snapshots=False)
    assert served == fresh.state(session_id, fresh.projector("threshold", budget=16_000))


def test_a_stale_active_projection_refuses_to_serve_and_names_the_rebuild(ledger):
    """A config other than the active version's is a ProjectionConfigError naming the rebuild command."""
    views = RecorderProjections(ledger.ports.log)
    built = build_version(ledger, views, views, policy=get_preset("default"), budget=16_000)
    views.activate(CONTEXT_VIEW, built.projection)
    session_id = ledger.sessions()[0].session_id
    with pytest.raises(contextledger.ProjectionConfigError) as refused:
        active_state(
            ledger, views, session_id, policy=get_preset("nexus"), policy_spec="new.toml", budget=20_000
        )
    assert refused.value.command == "contextledger rebuild --policy new.toml --budget 20000 --switch"
    assert refused.value.active == built.projection
    assert "contextledger rebuild --policy new.toml" in str(refused.value)


class _CountingCounter:
    """Counts how many event texts a renderer asks the token cache for."""

    def __init__(self, renderer: Renderer) -> None:
        self.events = 0
        inner = renderer.reader.count

        def count(projector, chunk):  # type: ignore[no-untyped-def]
            self.events += len(chunk)
            return inner(projector, chunk)

        renderer.reader.count = count  # type: ignore[method-assign]


def test_a_cold_renderer_serves_from_the_active_projection(ledger):
    """With the active version built under its config, a new renderer folds nothing: it starts at the row."""
    views = RecorderProjections(ledger.ports.log)
    built = build_version(ledger, views, views, policy=get_preset("default"), budget=16_000)
    session_id = ledger.sessions()[0].session_id
    inactive = Renderer(ledger, snapshots=True)
    spy = _CountingCounter(inactive)
    expected = inactive.render(session_id, "default", budget=16_000)
    assert spy.events == ledger.version(session_id)  # not active yet: folded from the log
    views.activate(CONTEXT_VIEW, built.projection)
    served = Renderer(ledger, snapshots=True)
    spy = _CountingCounter(served)
    assert served.render(session_id, "default", budget=16_000) == expected
    assert spy.events == 0
    other = Renderer(ledger, snapshots=True)
    spy = _CountingCounter(other)
    other.render(session_id, "threshold", budget=16_000)  # another config folds from the log, unrefused
    assert spy.events == ledger.version(session_id)


def test_require_active_refuses_a_config_the_active_version_was_not_built_under(ledger):
    """``require_active`` passes for the active version's config and names the rebuild command otherwise."""
    views = RecorderProjections(ledger.ports.log)
    renderer = Renderer(ledger)
    with pytest.raises(contextledger.ProjectionConfigError, match="no context projection is active"):
        renderer.require_active(renderer.projector("default", budget=16_000), "default", 16_000)
    built = build_version(ledger, views, views, policy=get_preset("default"), budget=16_000)
    views.activate(CONTEXT_VIEW, built.projection)
    renderer.require_active(renderer.projector("default", budget=16_000), "default", 16_000)
    with pytest.raises(contextledger.ProjectionConfigError) as refused:
        renderer.require_active(renderer.projector("threshold", budget=16_000), "threshold", 16_000)
    assert refused.value.command == "contextledger rebuild --policy threshold --budget 16000 --switch"
