"""A rebuild's comparison comes from the render digests the build wrote, and equals rendering every row."""

from __future__ import annotations

import hashlib
from pathlib import Path

import contextledger
import msgspec
import pytest
from contextledger.adapters.importers.service import import_file
from contextledger.adapters.store.projections import RecorderProjections
from contextledger.application.rebuild.blue_green import RebuildSpec, build_version, compare_versions
from contextledger.application.rebuild.projection_runner import CONTEXT_VIEW
from contextledger.application.rebuild.rebuild import rebuild
from contextledger.application.rebuild.render_digest import (
    EVICTING,
    RenderDigest,
    digests_of,
    encode_digest,
    state_digest,
)
from contextledger.domain.errors import PinnedOverBudgetError
from contextledger.projections.context import RenderedContext
from contextledger.projections.fold import Projector
from contextledger.projections.presets import get_preset
from hypothesis import HealthCheck, event, given, settings

from tests.conftest import TRANSCRIPTS
from tests.projections.projection_helpers import Words, count_all, policies, resolve, sessions

FILES = (
    "mini-swe-agent__psf__requests-1142.traj.json",
    "claude-code__132b2f66-ee5f-46f6-8904-32d9dc4d36c3.jsonl",
)


@pytest.fixture
def ledger(tmp_path: Path):
    """A SQLite ledger holding two real transcripts."""
    with contextledger.open_ledger(f"sqlite:///{tmp_path / 'r.db'}") as opened:
        for name in FILES:
            assert import_file(opened, TRANSCRIPTS / name).ok
        yield opened


def _two_versions(ledger):
    views = RecorderProjections(ledger.ports.log)
    live = build_version(ledger, views, views, policy=get_preset("default"), budget=16_000)
    views.activate(CONTEXT_VIEW, live.projection)
    candidate = build_version(ledger, views, views, policy=get_preset("threshold"), budget=16_000)
    return views, live.projection, candidate.projection


def test_the_comparison_from_digests_equals_the_one_from_rendering_every_row(ledger):
    """Digests written by the build give the same totals, evictions and differing sessions as renders."""
    views, live, candidate = _two_versions(ledger)
    assert len(views.row_keys(digests_of(candidate))) == 2
    from_digests = compare_versions(ledger, views, candidate)
    views.drop(digests_of(live))  # versions written before digests: every row is rendered again
    views.drop(digests_of(candidate))
    from_rows = compare_versions(ledger, views, candidate)
    assert from_digests == from_rows
    assert from_digests.live is not None
    assert from_digests.candidate.tokens != from_digests.live.tokens
    assert from_digests.differing == sorted(s.session_id for s in ledger.sessions())


def test_the_comparison_reads_no_event_again(ledger, monkeypatch):
    """Comparing two built versions decodes no event: the log was read once, by the build."""
    views, _, candidate = _two_versions(ledger)
    reads: list[str] = []
    original = ledger.events
    monkeypatch.setattr(
        ledger, "events", lambda session_id, **kw: reads.append(session_id) or original(session_id, **kw)
    )
    compare_versions(ledger, views, candidate)
    assert reads == []


def test_a_rebuild_without_comparison_builds_and_switches(ledger):
    """``compare=False`` builds and switches as usual and reports no comparison."""
    views = RecorderProjections(ledger.ports.log)
    spec = RebuildSpec(get_preset("default").model_dump_json(), 16_000)
    result = rebuild(ledger, spec, switch=True, compare=False)
    assert result.comparison is None
    assert views.active(CONTEXT_VIEW) == result.version
    assert len(views.row_keys(result.version)) == 2


def _digest_of_render(context: RenderedContext) -> RenderDigest:
    """The digest by its definition: the render's decisions counted per rule, its messages hashed."""
    evictions: dict[str, int] = {}
    for decision in context.decisions:
        if decision.action in EVICTING:
            evictions[decision.rule] = evictions.get(decision.rule, 0) + decision.last - decision.first + 1
    messages = hashlib.blake2b(msgspec.msgpack.encode(context.messages), digest_size=16).digest()
    return RenderDigest(context.tokens, evictions, messages)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session=sessions(), policy=policies())
def test_the_digest_of_a_state_equals_the_digest_of_its_render(session, policy):
    """At every position: the digest bytes of the render (its decisions counted), or the same refusal."""
    words = Words()
    projector = Projector(policy, words)
    state = projector.start()
    evicted = False
    for counted in count_all(session, words):
        state = projector.evolve(state, counted)
        try:
            expected = _digest_of_render(projector.render(state, resolve))
        except PinnedOverBudgetError:
            with pytest.raises(PinnedOverBudgetError):
                state_digest(projector, state, resolve)
            continue
        assert encode_digest(state_digest(projector, state, resolve)) == encode_digest(expected)
        evicted = evicted or bool(expected.evictions)
    event(f"evicted: {evicted}")
