"""A rebuild without comparison from empty writes no render digests; no digest ever describes an older row."""

from __future__ import annotations

import pytest
from contextledger.application.rebuild.blue_green import RebuildSpec, compare_versions
from contextledger.application.rebuild.projection_runner import CONTEXT_VIEW
from contextledger.application.rebuild.rebuild import rebuild
from contextledger.application.rebuild.render_digest import (
    DIGEST_FORMAT,
    RenderDigest,
    digests_of,
    encode_digest,
)
from contextledger.projections.presets import get_preset

from tests.application.rebuild.conftest import rendered_differently


@pytest.fixture
def ledger(two_transcripts_each_store):
    """Two real transcripts, on SQLite and on PostgreSQL (``two_transcripts_each_store``)."""
    return two_transcripts_each_store


def _spec(preset: str) -> RebuildSpec:
    return RebuildSpec(get_preset(preset).model_dump_json(), 16_000)


def _views(ledger):
    views = ledger.ports.projections
    assert views is not None
    return views


def _positions(views, name: str) -> dict[str, int]:
    """Each row's position under ``name`` (a version's rows, or its digests')."""
    keys = views.row_keys(name)
    return {key: position for key, (position, _) in views.load_rows(name, keys).items()}


def test_a_build_from_empty_without_comparison_writes_no_digests_and_later_comparisons_are_unchanged(ledger):
    """No digest rows; a comparison against that version equals the one against a version with digests."""
    views = _views(ledger)
    quick = rebuild(ledger, _spec("default"), compare=False)  # a --switch checks renders: it makes digests
    assert len(views.row_keys(quick.version)) == 2
    assert views.row_keys(digests_of(quick.version)) == []
    views.activate(CONTEXT_VIEW, quick.version)
    rendered = rebuild(ledger, _spec("threshold"), compare=True).comparison  # the live one rendered from rows
    views.activate(CONTEXT_VIEW, quick.version)
    views.drop(quick.version)
    views.drop(digests_of(quick.version))
    again = rebuild(ledger, _spec("default"), switch=True, compare=True)  # now with digests
    assert again.version == quick.version
    assert len(views.row_keys(digests_of(again.version))) == 2
    assert rendered is not None
    from_digests = compare_versions(ledger, views, rendered.candidate.version)
    assert rendered == from_digests
    assert rendered.differing == rendered_differently(ledger, "default", "threshold")


def test_digests_left_under_an_empty_version_are_deleted_before_it_is_built_without_them(ledger):
    """A digest row a half-done drop left (its version empty, no checkpoint) never outlives the build."""
    views = _views(ledger)
    version = rebuild(ledger, _spec("default"), compare=False).version
    views.drop(version)  # a drop that stopped before deleting the digests
    stale = encode_digest(RenderDigest(tokens=1, messages=b"stale", format=DIGEST_FORMAT))
    session = ledger.sessions()[0].session_id
    views.commit(digests_of(version), 0, {session: (1, stale)})
    assert views.row_keys(digests_of(version)) == [session]
    rebuild(ledger, _spec("default"), compare=False)
    assert views.row_keys(digests_of(version)) == []


def test_a_resumed_version_keeps_each_digest_at_its_row_even_without_comparison(ledger):
    """Resuming a version that has digests writes them for every row it moves: none describes an older row."""
    views = _views(ledger)
    version = rebuild(ledger, _spec("default"), switch=True).version
    assert _positions(views, digests_of(version)) == _positions(views, version)
    session = ledger.sessions()[0].session_id
    ledger.add_user_message(session, "one more question about the failing test")
    rebuild(ledger, _spec("default"), compare=False)
    rows = _positions(views, version)
    assert rows[session] == ledger.version(session)
    assert _positions(views, digests_of(version)) == rows
