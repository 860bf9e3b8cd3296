"""The rebuild use case: record config, build beside the live version, compare, switch, drop."""

from __future__ import annotations

import contextledger
import pytest
from contextledger.application.kernel.token_cache import CachedTokenCounter
from contextledger.application.rebuild import rebuild as rebuild_module
from contextledger.application.rebuild.blue_green import RebuildSpec
from contextledger.application.rebuild.rebuild import rebuild, store_views
from contextledger.application.render.context_versions import CONFIG_PREFIX, CONTEXT_VIEW
from contextledger.domain.errors import ValidationError
from contextledger.projections.presets import get_preset


def _spec(preset: str, budget: int = 2_000, audit_views: tuple[str, ...] = ()) -> RebuildSpec:
    return RebuildSpec(get_preset(preset).model_dump_json(), budget, "heuristic", audit_views=audit_views)


def _version_of(ledger: contextledger.Ledger, spec: RebuildSpec) -> str:
    views, reader = store_views(ledger)
    return spec.runner(ledger, reader, views).projection  # building a runner reads and writes nothing


def _written(ledger: contextledger.Ledger, version: str) -> tuple[str | None, int, list[str]]:
    views, _ = store_views(ledger)
    return views.active(CONFIG_PREFIX + version), views.load_tracking(version), views.row_keys(version)


def test_a_rebuild_builds_and_compares_and_switches_only_when_asked(filled):
    """Without ``switch`` the live version keeps serving; with it the candidate does; both are compared."""
    views, reader = store_views(filled)
    first = rebuild(filled, _spec("default"), switch=True)
    assert views.active(CONTEXT_VIEW) == first.version
    assert first.comparison.live is None  # nothing served before
    assert first.comparison.candidate.sessions == 2
    assert first.stats.tracking == reader.head()
    second = rebuild(filled, _spec("threshold"))
    assert not second.switched
    assert views.active(CONTEXT_VIEW) == first.version
    assert second.comparison.live is not None
    assert second.comparison.live.version == first.version
    assert sorted(views.row_keys(second.version)) == ["s0", "s1"]


def test_the_active_version_is_never_dropped_and_a_refused_drop_writes_nothing(filled):
    """Dropping what serves (now or after the switch) is refused before any config or row is written."""
    live = rebuild(filled, _spec("default"), switch=True).version
    candidate = _spec("threshold")
    with pytest.raises(ValidationError, match="switch first"):
        rebuild(filled, candidate, drop=live)
    with pytest.raises(ValidationError, match="switched to"):
        rebuild(
            filled,
            candidate,
            switch=True,
            drop=_version_of(filled, candidate),
        )
    name = _version_of(filled, candidate)
    assert _written(filled, name) == (None, 0, [])
    views, _ = store_views(filled)
    assert views.active(CONTEXT_VIEW) == live


def test_switching_then_dropping_the_old_version_leaves_only_the_new_one(filled):
    """``switch`` with ``drop`` of the old live version serves the candidate and deletes the old rows."""
    old = rebuild(filled, _spec("default"), switch=True).version
    new = rebuild(filled, _spec("threshold"), switch=True, drop=old)
    views, _ = store_views(filled)
    assert (new.switched, new.dropped) == (True, old)
    assert views.active(CONTEXT_VIEW) == new.version
    assert views.row_keys(old) == []
    assert views.load_tracking(old) == 0


def test_a_rebuild_from_the_start_warms_its_tokenizer_before_the_leases_and_a_rebuild_at_the_head_does_not(
    filled, monkeypatch
):
    """warm() once before the config is recorded when the version has no checkpoint yet; none on a rerun.

    A new version after a config change warms too, though the audit views it keeps are at the head already:
    its fold counts the derived texts of the new policy, and the main thread loaded the encoding itself.
    """
    events: list[str] = []
    monkeypatch.setattr(CachedTokenCounter, "warm", lambda self: events.append("warm"))
    record = rebuild_module.record_config
    monkeypatch.setattr(
        rebuild_module, "record_config", lambda *a, **k: (events.append("config"), record(*a, **k))[1]
    )
    views = ("summaries", "calls", "search")  # the CLI's rebuild keeps them too
    rebuild(filled, _spec("default", audit_views=views))
    assert events == ["warm", "config"]
    events.clear()
    rebuild(filled, _spec("default", audit_views=views))  # the version is at the head: nothing to count
    assert events == ["config"]
    events.clear()
    rebuild(filled, _spec("threshold", audit_views=views))  # a config change: its views are at the head
    assert events == ["warm", "config"]


def test_dropping_a_version_the_ledger_never_built_is_refused_before_anything_is_written(filled):
    """A typo in ``drop`` is a ValidationError naming it, not a rebuild that reports it dropped."""
    live = rebuild(filled, _spec("default"), switch=True).version
    candidate = _spec("threshold")
    with pytest.raises(ValidationError, match="no context version of this ledger"):
        rebuild(filled, candidate, drop=live + "-typo")
    assert _written(filled, _version_of(filled, candidate)) == (None, 0, [])


def test_a_session_whose_fold_failed_is_remembered_so_a_later_run_does_not_switch_to_it(ledger):
    """A policy naming a tool ``read_fil`` cannot fold a session whose schemas name ``read_file``.

    The first run refused ``switch`` (its fold had failed in memory), but wrote no row and no digest: the
    session vanished from the counts, and the next run, with nothing left to fold, switched to a version
    under which it cannot render.
    """
    plain = ledger.start_session(system_prompt="s")
    ledger.add_user_message(plain, "hello")
    schemas = ledger.start_session(system_prompt="s", tools=[{"name": "read_file"}])
    ledger.add_user_message(schemas, "read it")
    typo = get_preset("default").model_dump()
    typo["retention"]["tools"] = {"read_fil": {"keep_last": 2}}
    spec = RebuildSpec(contextledger.Policy.model_validate(typo).model_dump_json(), 2_000, "heuristic")
    live = rebuild(ledger, _spec("default"), switch=True).version
    first = rebuild(ledger, spec)
    assert first.comparison.candidate.sessions == 2
    assert list(first.comparison.candidate.failed) == [schemas]
    assert "read_fil" in first.comparison.candidate.failed[schemas]
    for compare in (True, False):
        with pytest.raises(ValidationError, match="cannot render"):
            rebuild(ledger, spec, switch=True, compare=compare)
    views, _ = store_views(ledger)
    assert views.active(CONTEXT_VIEW) == live
