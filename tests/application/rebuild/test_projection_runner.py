"""The projection runner on every real transcript: versions side by side, switch, kill -9 resume, gaps."""

from __future__ import annotations

import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import contextledger
import psycopg
import pytest
from contextledger.adapters.importers.service import import_file
from contextledger.adapters.store.projections import RecorderProjections
from contextledger.adapters.tokenizers import get_counter
from contextledger.application.kernel.token_cache import CachedTokenCounter
from contextledger.application.rebuild.card_facts import CARD_FACTS
from contextledger.application.rebuild.projection_runner import CONTEXT_VIEW, BatchDone, ProjectionRunner
from contextledger.application.render.context_rows import row_state
from contextledger.application.render.renderer import Renderer
from contextledger.application.views.token_rows import token_rows
from contextledger.projections.counting import counted_texts

from tests.conftest import TRANSCRIPTS

_DOCS = {"FORMATS.md", "PROVENANCE.md"}


def _files() -> list[Path]:
    return [p for p in sorted(TRANSCRIPTS.iterdir()) if p.name not in _DOCS]


@pytest.fixture(scope="module")
def full_db(tmp_path_factory) -> Path:
    """A SQLite ledger file holding every real transcript (built once, copied per test)."""
    path = tmp_path_factory.mktemp("full") / "ledger.db"
    with contextledger.open_ledger(f"sqlite:///{path}") as ledger:
        for file in _files():
            assert import_file(ledger, file).ok
    return path


@pytest.fixture
def full_url(full_db: Path, tmp_path: Path) -> str:
    """A private copy of the full ledger."""
    copy = tmp_path / "ledger.db"
    shutil.copy(full_db, copy)
    return f"sqlite:///{copy}"


def _views(ledger: contextledger.Ledger) -> RecorderProjections:
    return RecorderProjections(ledger.ports.log)  # type: ignore[arg-type]


def _rows(views: RecorderProjections, projection: str) -> dict[str, tuple[int, bytes]]:
    rows = {key: views.load_row(projection, key) for key in views.row_keys(projection)}
    return {key: row for key, row in rows.items() if row is not None}


def test_every_session_folds_to_what_the_renderer_renders(full_url):
    """Each row holds the state a fresh Renderer folds at the session's head; renders are identical."""
    with contextledger.open_ledger(full_url) as ledger:
        views = _views(ledger)
        runner = ProjectionRunner(ledger, views, views)
        stats = runner.run()
        assert stats.failed == {}
        rows = _rows(views, runner.projection)
        sessions = [s.session_id for s in ledger.sessions()]
        assert sorted(rows) == sorted(sessions)
        fresh = Renderer(ledger, snapshots=False)
        projector = fresh.projector("default")
        for session_id, (position, data) in rows.items():
            assert position == ledger.version(session_id)
            state = row_state(ledger, session_id, data)
            assert state == fresh.state(session_id, projector)
            assert projector.render(state, ledger.text) == fresh.render(session_id, "default")


def test_incremental_view_equals_a_rebuild_from_scratch(full_db, tmp_path):
    """Folding as sessions and summaries arrive gives byte-identical rows to one rebuild at the end."""
    files = _files()
    with contextledger.open_ledger(f"sqlite:///{tmp_path / 'grow.db'}") as ledger:
        views = _views(ledger)
        live = ProjectionRunner(ledger, views, views, batch_size=300)
        for file in files[: len(files) // 2]:
            assert import_file(ledger, file).ok
        live.run()
        early = max(ledger.sessions(), key=lambda s: s.events).session_id
        for file in files[len(files) // 2 :]:
            assert import_file(ledger, file).ok
        live.run()
        # An artifact due before the folded position: the session refolds with it.
        ledger.record_summary(
            early, covers_from=2, covers_through=4, text="SUMMARY of the start", produced_at=5
        )
        assert live.run().events == 1
        scratch = ProjectionRunner(ledger, views, views, projection="scratch")
        scratch.run()
        incremental = _rows(views, live.projection)
        assert incremental == _rows(views, "scratch")
        assert len(incremental) == len(ledger.sessions())
        summarized = row_state(ledger, early, incremental[early][1])
        assert summarized == Renderer(ledger, snapshots=False).state(early, live.projector)
    del full_db


def test_a_changed_policy_builds_beside_the_live_version_then_switches(full_url):
    """A second version builds beside the active one; the switch is one write; drop removes the old."""
    with contextledger.open_ledger(full_url) as ledger:
        views = _views(ledger)
        old = ProjectionRunner(ledger, views, views, policy="default", budget=16_000)
        old.run()
        views.activate(CONTEXT_VIEW, old.projection)
        new = ProjectionRunner(ledger, views, views, policy="threshold", budget=16_000)
        assert new.projection != old.projection
        assert re.fullmatch(r"context/threshold-16k/[0-9a-f]{16}/cl100k_base/r\d+", new.projection)
        new.run()
        assert views.active(CONTEXT_VIEW) == old.projection  # readers keep the old version meanwhile
        before, after = _rows(views, old.projection), _rows(views, new.projection)
        assert before.keys() == after.keys()
        assert any(before[k][1] != after[k][1] for k in before)
        views.activate(CONTEXT_VIEW, new.projection)
        assert views.active(CONTEXT_VIEW) == new.projection
        assert _rows(views, old.projection) == before  # kept until dropped
        views.drop(old.projection)
        assert _rows(views, old.projection) == {}
        assert _rows(views, new.projection) == after


def test_a_second_runner_of_one_projection_is_refused(full_url):
    """While one runner holds a projection, another runner of it gets ProjectionLockedError."""
    with contextledger.open_ledger(full_url) as ledger, contextledger.open_ledger(full_url) as other:
        views = _views(ledger)
        runner = ProjectionRunner(ledger, views, views)
        lease = views.acquire(runner.projection)
        try:
            rival_views = _views(other)
            with pytest.raises(contextledger.ProjectionLockedError):
                ProjectionRunner(other, rival_views, rival_views).run()
        finally:
            lease.release()
        assert ProjectionRunner(other, rival_views, rival_views).run().batches > 0


def test_kill_9_mid_rebuild_resumes_from_the_checkpoint(full_url, tmp_path):
    """A rebuild killed by SIGKILL after some batches resumes after its last commit, redoing none."""
    log = tmp_path / "batches.log"
    log.touch()
    child = Path(__file__).with_name("projection_child.py")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    process = subprocess.Popen([sys.executable, str(child), full_url, str(log)], env=env)
    try:
        deadline = time.monotonic() + 120
        while len(log.read_text().splitlines()) < 3:
            assert process.poll() is None, "the child finished before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.01)
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL
    logged = [tuple(map(int, line.split())) for line in log.read_text().splitlines()]
    with contextledger.open_ledger(full_url) as ledger:
        views = _views(ledger)
        done: list[BatchDone] = []
        runner = ProjectionRunner(ledger, views, views, batch_size=50, on_batch=done.append)
        checkpoint = views.load_tracking(runner.projection)
        assert checkpoint >= logged[-1][1] > 0
        total = len(views.read_notifications(0, 10**9))
        remaining = len(views.read_notifications(checkpoint, 10**9))
        stats = runner.run()  # the dead child's lease is taken over at once (same host, no process)
        assert stats.started_at == checkpoint
        assert done[0].first_id > checkpoint
        assert stats.events == sum(d.events for d in done) == remaining < total
        scratch = ProjectionRunner(ledger, views, views, projection="scratch")
        scratch.run()
        assert _rows(views, runner.projection) == _rows(views, "scratch")


def test_live_tail_folds_events_appended_after_catch_up(tmp_path):
    """``follow`` catches up, then picks up new events on its next poll."""
    with contextledger.open_ledger(f"sqlite:///{tmp_path / 'tail.db'}") as ledger:
        session_id = ledger.start_session(system_prompt="be brief", model="m")
        ledger.add_user_message(session_id, "hello")
        views = _views(ledger)
        runner = ProjectionRunner(ledger, views, views)
        polls: list[float] = []

        def sleep(seconds: float) -> None:
            polls.append(seconds)
            ledger.add_user_message(session_id, f"again {len(polls)}")

        stats = runner.follow(stop=lambda: len(polls) >= 2, poll=0.5, sleep=sleep)
        assert polls == [0.5, 0.5]
        assert stats.events == 4
        row = views.load_row(runner.projection, session_id)
        assert row is not None
        assert row[0] == 4 == ledger.version(session_id)


def test_a_notification_gap_is_skipped(pg_url):
    """A rolled-back PostgreSQL insert leaves an id gap; the runner folds past it and tracks the last id."""
    with contextledger.open_ledger(pg_url) as ledger:
        session_id = ledger.start_session(system_prompt="be brief", model="m")
        schema = pg_url.partition("schema=")[2]
        with psycopg.connect(pg_url.split("?")[0]) as conn:
            conn.execute(  # an append through the one write path (ADR 0031), then rolled back
                f'SELECT "{schema}".contextledger_events_append(%s::text[], %s::bigint[], %s::text[], '
                "%s::bytea[], '{}', '{}', '{}', '{}', '{}', '{}')",
                (["z"], [1], ["t"], [b"\x00"]),
            )
            conn.rollback()
        ledger.add_user_message(session_id, "after the gap")
        views = _views(ledger)
        runner = ProjectionRunner(ledger, views, views, batch_size=1)
        ids = [n.id for n in views.read_notifications(0, 10)]
        assert ids[1] - ids[0] == 2
        stats = runner.run()
        assert (stats.batches, stats.events, stats.tracking) == (2, 2, ids[1])
        row = views.load_row(runner.projection, session_id)
        assert row is not None
        assert row[0] == 2


def test_a_forked_session_folds_at_its_session_positions(forked):
    """A fork's own events follow its parent's prefix: its row is the renderer's state at its position."""
    ledger, fork = forked, "child"
    views = _views(ledger)
    runner = ProjectionRunner(ledger, views, views, batch_size=4)
    assert runner.run().failed == {}
    fresh = Renderer(ledger, snapshots=False)
    for session_id in ("parent", fork):
        position, data = views.load_row(runner.projection, session_id) or (0, b"")
        assert position == ledger.version(session_id)
        assert row_state(ledger, session_id, data) == fresh.state(session_id, fresh.projector("default"))
    assert ledger.version(fork) == 9


def test_two_runners_taking_turns_on_one_checkpoint_agree_with_a_rebuild(tmp_path):
    """A runner resuming after another moved its checkpoint reads rows back instead of trusting its memory."""
    with contextledger.open_ledger(f"sqlite:///{tmp_path / 'turns.db'}") as ledger:
        ledger.start_session(session_id="s", system_prompt="sys")
        for number in range(10):
            ledger.add_user_message("s", f"question {number} " + "words " * 30)
        views = _views(ledger)
        first = ProjectionRunner(ledger, views, views, projection="turns")
        first.run()
        for number in range(10, 20):
            ledger.add_user_message("s", f"question {number} " + "words " * 30)
        ledger.record_summary("s", covers_from=2, covers_through=12, text="SUMMARY of 2-12", produced_at=15)
        ProjectionRunner(ledger, views, views, projection="turns").run()  # another runner, same checkpoint
        for number in range(20, 25):
            ledger.add_user_message("s", f"question {number} " + "words " * 30)
        first.run()
        ProjectionRunner(ledger, views, views, projection="scratch").run()
        assert views.load_row("turns", "s") == views.load_row("scratch", "s")
        state = row_state(ledger, "s", (views.load_row("turns", "s") or (0, b""))[1])
        assert [s.summary_id for s in state.available] != []


def test_a_rebuild_leaves_every_count_in_the_token_cache(full_url):
    """The view writes its fresh counts once per batch: after the run a new counter tokenizes nothing."""
    with contextledger.open_ledger(full_url) as ledger:
        views = _views(ledger)
        runner = ProjectionRunner(ledger, views, views, batch_size=500)
        assert runner.run().failed == {}
        texts = [
            t for s in ledger.sessions() for r in ledger.events(s.session_id) for t in counted_texts(r.event)
        ]
        plain = get_counter("cl100k_base")
        fresh = CachedTokenCounter(plain, ledger.ports.token_counts, ledger.ports.blobs)
        assert fresh.count_texts(texts) == [plain.count(ledger.text(t)) for t in texts]
        assert fresh.tokenized == 0


def _copy(full_db: Path, path: Path) -> Path:
    """A private copy of the full ledger at ``path``."""
    shutil.copy(full_db, path)
    return path


def _all_rows(path: Path) -> list[tuple[str, str, int, bytes]]:
    with sqlite3.connect(path) as db:
        return db.execute(
            "SELECT projection, key, position, state FROM ledger_projection_rows ORDER BY projection, key"
        ).fetchall()


def test_commits_landing_while_the_next_batch_folds_write_what_commits_in_turn_write(full_db, tmp_path):
    """Each batch commits on its own thread while the next folds, reading its rows back before they land.

    Every commit is held back 20 ms, so the next batch reads token blocks, card facts and session
    rows the previous batch has not committed yet; the rows and checkpoints equal those of a run
    that commits each batch before folding the next (batches of 37: blocks span batches). A batch
    is reported only once another thread reads its checkpoint.
    """
    dumps = []
    for aside in (True, False):
        path = _copy(full_db, tmp_path / f"aside-{aside}.db")
        with contextledger.open_ledger(f"sqlite:///{path}") as ledger:
            views = _views(ledger)
            tables: Any = views._tables
            commit = tables.projection_commit

            def held(commits: Any, owner: str, commit: Any = commit) -> None:
                time.sleep(0.02)
                commit(commits, owner)

            tables.projection_commit = held
            if not aside:
                views.commit_aside = views.commit_many  # type: ignore[method-assign]
            runner = ProjectionRunner(ledger, views, views, batch_size=37)
            reported: list[tuple[int, int]] = []

            def committed(
                done: BatchDone,
                views: RecorderProjections = views,
                name: str = runner.projection,
                reported: list[tuple[int, int]] = reported,
            ) -> None:
                seen: list[int] = []
                reader = threading.Thread(target=lambda: seen.append(views.load_tracking(name)))
                reader.start()
                reader.join(30)
                reported.append((done.tracking, seen[0]))

            runner.on_batch = committed
            stats = runner.run()
            assert stats.failed == {}
            assert stats.batches == len(reported) > 20
            assert all(tracking <= seen for tracking, seen in reported)
        dumps.append(_all_rows(path))
    assert dumps[0] == dumps[1]
    names = {row[0] for row in dumps[0]}
    assert {CARD_FACTS, token_rows("cl100k_base")} < names  # and the context view's rows and digests


class _InPlace:
    """A tokenizer that cannot count ahead (the same counts, counted in place)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name

    def count(self, text: str) -> int:
        return int(self.inner.count(text))

    def count_many(self, texts: list[str]) -> list[int]:
        return list(self.inner.count_many(texts))


def test_a_rebuild_under_another_policy_reads_each_batchs_token_rows_once(full_db, tmp_path):
    """Every count is known: the rows read ahead of a batch serve its fold, which reads none again.

    The rows it writes equal those of a rebuild that reads every batch's counts when it folds it
    (a tokenizer that does not count ahead, so nothing is read ahead).
    """
    dumps = []
    for ahead in (True, False):
        path = _copy(full_db, tmp_path / f"ahead-{ahead}.db")
        with contextledger.open_ledger(f"sqlite:///{path}") as ledger:
            views = _views(ledger)
            assert ProjectionRunner(ledger, views, views, batch_size=500).run().failed == {}
            reads: list[str] = []
            load_range = views.load_range

            def spy(
                name: str, first: str, last: str, load_range: Any = load_range, reads: list[str] = reads
            ) -> Any:
                if name == token_rows("cl100k_base"):
                    reads.append(first)
                return load_range(name, first, last)

            views.load_range = spy  # type: ignore[method-assign]
            runner = ProjectionRunner(ledger, views, views, policy="threshold", batch_size=500)
            counter = runner.renderer.counter
            if not ahead:
                counter.counter = _InPlace(counter.counter)
            assert counter.counts_ahead is ahead
            stats = runner.run()
            assert stats.failed == {}
            assert len(reads) == stats.batches > 5
        dumps.append(_all_rows(path))
    assert dumps[0] == dumps[1]
