"""``contextledger doctor`` (alias ``info``) on every backend: store, schema, tokenizers, versions, leases."""

from __future__ import annotations

import json
import socket
from datetime import UTC, datetime, timedelta

import contextledger
import pytest
from contextledger.adapters.store.postgres import SCHEMA_VERSION
from contextledger.adapters.store.projection_tables import SQLITE_SCHEMA_VERSION
from contextledger.application.kernel.summary_log import summary_stream
from contextledger.application.rebuild.health import health, masked_url
from contextledger.application.rebuild.projection_runner import ProjectionRunner
from contextledger.application.render.context_versions import CONTEXT_VIEW
from contextledger.domain.events import CompactionRequested, SummaryAttemptStarted

DEAD = f"{socket.gethostname()}-999999999"
"""A summary worker name of this host whose process cannot exist."""


def _working_ledger(ledger: contextledger.Ledger) -> tuple[str, str]:
    """A session, an active context version a step behind the log, a projection lease, two summary leases."""
    session = ledger.start_session(system_prompt="the system prompt")
    ledger.add_user_message(session, "fix the parser")
    ledger.add_assistant_message(session, "done")
    views = ledger.ports.projections
    assert views is not None
    runner = ProjectionRunner(ledger, views, views, policy="default", budget=16_000)
    runner.run()
    views.activate(CONTEXT_VIEW, runner.projection)
    stream = summary_stream(session)
    now = ledger.clock.now()
    events = []
    for n, worker in enumerate(("elsewhere-host-1", DEAD)):
        request = f"r{n}"
        events += [
            CompactionRequested(
                request_id=request, session_id=session, covers_from=2, covers_through=3, planned_at=3
            ),
            SummaryAttemptStarted(
                request_id=request, attempt=1, worker=worker, lease_until=now + timedelta(minutes=5)
            ),
        ]
    ledger.log.append(stream, 0, events)
    ledger.add_user_message(session, "one more thing")  # the version is now 5 events behind the head
    return session, runner.projection


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres"])
def test_health_reports_store_schema_tokenizers_lag_and_leases(backend, tmp_path, request):
    """The same report on each backend: schema (none in memory), the active version's lag, leases' life."""
    url = {"memory": "memory://", "sqlite": f"sqlite:///{tmp_path / 'h.db'}"}.get(backend)
    url = url or request.getfixturevalue("pg_url")
    from contextledger.adapters.system import worker_alive  # noqa: PLC0415

    with contextledger.open_ledger(url) as ledger:
        _, version = _working_ledger(ledger)
        views = ledger.ports.projections
        assert views is not None
        lease = views.acquire("summaries/v1")
        try:
            report = health(
                ledger, tokenizers=["cl100k_base", "heuristic", "nope"], holder_alive=worker_alive
            )
        finally:
            lease.release()
    assert (
        report.schema_version
        == {
            "memory": None,
            "sqlite": SQLITE_SCHEMA_VERSION,
            "postgres": SCHEMA_VERSION,
        }[backend]
    )
    assert [(t.name, t.available) for t in report.tokenizers] == [
        ("cl100k_base", True),
        ("heuristic", True),
        ("nope", False),
    ]
    assert report.active_context == version
    [active] = [v for v in report.views if v.active]
    assert (active.checkpoint, active.behind) == (version, 5)  # 4 summary-stream events, 1 message
    assert report.head - active.position == 5
    assert [(held.projection, held.alive) for held in report.projection_leases] == [("summaries/v1", True)]
    by_holder = {s.holder: s.alive for s in report.summary_leases}
    assert by_holder == {"elsewhere-host-1": True, DEAD: False}


def test_doctor_and_info_print_it_and_json_has_it(tmp_path, run_cli):
    """``doctor`` prints each part; ``info --json`` is the same report as one JSON document."""
    url = f"sqlite:///{tmp_path / 'd.db'}"
    with contextledger.open_ledger(url) as ledger:
        session, version = _working_ledger(ledger)
    code, out, err = run_cli("doctor", "--db", url)
    assert code == 0, err
    flat = " ".join(out.split())
    assert f"database: {url}" in flat
    assert "schema version: 1" in flat
    assert "cl100k_base" in flat
    assert "worker leases" in flat
    assert "alive" in flat
    assert "dead" in flat
    code, out, err = run_cli("info", "--db", url, "--json")
    assert code == 0, err
    document = json.loads(out)
    assert document["schema_version"] == 1
    assert document["active_context"] == version
    assert {v["checkpoint"]: v["behind"] for v in document["views"]}[version] == 5
    assert {s["holder"] for s in document["summary_leases"]} == {"elsewhere-host-1", DEAD}
    assert all(s["session_id"] == session for s in document["summary_leases"])


def test_the_database_password_is_masked():
    """A URL's password never prints; the rest of the URL does."""
    assert masked_url("postgresql://me:s3cr@t@db.example:5432/agents?schema=x") == (
        "postgresql://me:***@db.example:5432/agents?schema=x"
    )
    assert masked_url("sqlite:///tmp/a:b@c.db") == "sqlite:///tmp/a:b@c.db"
    assert datetime.now(UTC)  # (times in the report are aware UTC datetimes)
