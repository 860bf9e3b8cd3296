"""Rebuilds over worker processes: rows as one process writes, per-shard checkpoints, a tail after."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import contextledger
import pytest
from contextledger.adapters.importers.service import import_file
from contextledger.adapters.parallel_rebuild import auto_workers, rebuild_in_shards
from contextledger.adapters.store.projections import RecorderProjections
from contextledger.application.rebuild.blue_green import RebuildSpec
from contextledger.application.rebuild.rebuild import store_views
from contextledger.application.search.text_index import SEARCH_VIEW
from contextledger.application.views.view_runner import Shard
from contextledger.domain.errors import ConfigError, ProjectionLockedError, StoreError, ValidationError
from contextledger.projections.presets import get_preset

from tests.conftest import TRANSCRIPTS

# Spawned workers unpickle the opener by module name: a sibling module on an absolute path imports there,
# where ``tests`` (a rootdir-relative name) may not.
sys.path.insert(0, str(Path(__file__).parent))
from parallel_openers import opens_only_in_the_parent

_DOCS = {"FORMATS.md", "PROVENANCE.md"}
_VIEWS = ("summaries", "calls", "search")


@pytest.fixture(scope="module")
def full_db(tmp_path_factory) -> Path:
    """A SQLite ledger file holding every real transcript, with a summary and a recorded call."""
    path = tmp_path_factory.mktemp("shards") / "ledger.db"
    with contextledger.open_ledger(f"sqlite:///{path}") as ledger:
        for file in sorted(TRANSCRIPTS.iterdir()):
            if file.name not in _DOCS:
                assert import_file(ledger, file).ok
        longest = max(ledger.sessions(), key=lambda s: s.events).session_id
        ledger.record_summary(
            longest, covers_from=2, covers_through=6, text="SUMMARY of the start", produced_at=8
        )
    return path


@pytest.fixture
def url(full_db: Path, tmp_path: Path) -> str:
    """A private copy of the full ledger."""
    copy = tmp_path / "ledger.db"
    shutil.copy(full_db, copy)
    return f"sqlite:///{copy}"


def _spec(name: str) -> RebuildSpec:
    return RebuildSpec(
        get_preset("default").model_dump_json(), audit_views=_VIEWS, projection=name, views_suffix=f"/{name}"
    )


def _all_rows(views: RecorderProjections, names: list[str]) -> dict[str, dict[str, tuple[int, bytes]]]:
    out = {}
    for name in names:
        out[name] = {key: views.load_row(name, key) for key in views.row_keys(name)}
    return out


def _names(name: str) -> list[str]:
    return [name, f"summaries/v1/{name}", f"model_calls/v1/{name}", f"{SEARCH_VIEW}/{name}"]


def test_two_workers_write_the_rows_one_process_writes(url):
    """Shards fold disjoint sessions into the same rows: byte-identical to an unsharded rebuild."""
    stats = rebuild_in_shards(contextledger.open_ledger, url, _spec("two"), 2)
    with contextledger.open_ledger(url) as ledger:
        views = store_views(ledger)[0]
        one = _spec("one").runner(ledger, views, views).run()
        two_rows = _all_rows(views, _names("two"))
        one_rows = _all_rows(views, _names("one"))
        assert stats.failed == one.failed == {}
        assert stats.events == one.events  # each event is decoded and folded by exactly one shard
        for a, b in zip(_names("two"), _names("one"), strict=True):
            assert two_rows[a] == one_rows[b]
        assert len(two_rows["two"]) == len(ledger.sessions())
        head = views.head()
        # Each shard's checkpoint, and the hand-over of the view's own checkpoint to the tail.
        assert views.load_tracking("two@0/2") == views.load_tracking("two@1/2") == head
        assert views.load_tracking("two") == head


def test_a_tail_after_a_sharded_rebuild_folds_only_new_events(url):
    """After the hand-over one unsharded runner goes on from the shards' position, not from zero."""
    rebuild_in_shards(contextledger.open_ledger, url, _spec("two"), 2)
    with contextledger.open_ledger(url) as ledger:
        views = store_views(ledger)[0]
        session = ledger.sessions()[0].session_id
        ledger.append(session, contextledger.UserMessage(content="one more question"))
        tail = _spec("two").runner(ledger, views, views).run()
        assert tail.events == 1
        scratch = _spec("scratch").runner(ledger, views, views)
        scratch.run()
        assert views.load_row("two", session) == views.load_row("scratch", session)


def test_a_failing_worker_is_named_and_the_rebuild_fails_typed(url):
    """A worker that cannot open the ledger fails the rebuild with a StoreError naming its shard."""
    with pytest.raises(StoreError, match=r"shard \d: StoreError: the store is out of reach"):
        rebuild_in_shards(opens_only_in_the_parent, url, _spec("bad"), 2)


def test_shards_split_sessions_by_a_stable_hash():
    """A stream and its ``::`` side streams land in the same shard; shard numbers are checked."""
    shards = [Shard(i, 3) for i in range(3)]
    for session in ["a", "b", "session-42", "x::y"]:
        holders = [s for s in shards if s.holds(session)]
        assert len(holders) == 1
        assert holders[0].holds(f"{session}::summaries")
        assert holders[0].holds(f"{session}::calls")
    with pytest.raises(ValidationError):
        Shard(3, 3)
    assert auto_workers(10) == 1
    assert auto_workers(10_000_000) >= 1


def test_workers_on_postgres_write_the_rows_one_process_writes(pg_url):
    """On PostgreSQL the workers are spawned (no fork of a pool's threads) and agree with one process."""
    with contextledger.open_ledger(pg_url) as ledger:
        for name in sorted(TRANSCRIPTS.iterdir())[:6]:
            if name.name not in _DOCS:
                assert import_file(ledger, name).ok
    stats = rebuild_in_shards(contextledger.open_ledger, pg_url, _spec("two"), 2)
    with contextledger.open_ledger(pg_url) as ledger:
        views = store_views(ledger)[0]
        one = _spec("one").runner(ledger, views, views).run()
        assert stats.events == one.events > 0
        for a, b in zip(_names("two"), _names("one"), strict=True):
            assert _all_rows(views, [a])[a] == _all_rows(views, [b])[b]


def test_dropping_a_version_drops_its_shards_checkpoints_too(url):
    """A version rebuilt with workers after a drop starts every shard from zero: all rows come back."""
    rebuild_in_shards(contextledger.open_ledger, url, _spec("v"), 2)
    with contextledger.open_ledger(url) as ledger:
        views = store_views(ledger)[0]
        sessions = len(ledger.sessions())
        views.drop("v")
        assert [views.load_tracking(n) for n in ("v", "v@0/2", "v@1/2")] == [0, 0, 0]
    stats = rebuild_in_shards(contextledger.open_ledger, url, _spec("v"), 2)
    with contextledger.open_ledger(url) as ledger:
        views = store_views(ledger)[0]
        assert stats.started_at == 0
        assert len(views.row_keys("v")) == sessions


def test_a_held_view_refuses_a_sharded_rebuild_and_memory_ledgers_are_refused(url):
    """The parent takes the views' own leases first: a running tail makes the rebuild fail, typed."""
    with contextledger.open_ledger(url) as ledger:
        views = store_views(ledger)[0]
        tail = _spec("held").runner(ledger, views, views)
        with tail.runner.leases(), pytest.raises(ProjectionLockedError):
            rebuild_in_shards(contextledger.open_ledger, url, _spec("held"), 2)
    with pytest.raises(ConfigError, match="one worker"):
        rebuild_in_shards(contextledger.open_ledger, "memory://", _spec("m"), 2)
