"""The kill -9 campaign on SQLite and PostgreSQL: nothing acknowledged lost or doubled, stuck or left."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "adapters" / "summarizers"))
from campaign import run
from loopback import Reply, serve

LONG = os.environ.get("CONTEXTLEDGER_LONG") == "1"
ROUNDS = 25 if LONG else 2
"""Kills per target and backend: 2 in CI, 25 in the long mode (about 250 kills in all)."""


def _serve(*replies: dict[str, Any]) -> Any:
    return serve(*(Reply(**r) for r in replies))


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_kill_9_campaign(backend, tmp_path, transcripts, request):
    """Writers, importers, the summary worker and rebuilds killed at random points, then every check."""
    url = (
        f"sqlite:///{tmp_path / 'campaign.db'}" if backend == "sqlite" else request.getfixturevalue("pg_url")
    )
    figures = run(url, tmp_path, transcripts, rounds=ROUNDS, seed=21, serve=_serve)
    found = figures.as_dict()
    out = os.environ.get("CONTEXTLEDGER_CAMPAIGN_OUT")
    if out:
        with Path(out).open("a") as sink:
            sink.write(json.dumps(found) + "\n")
    assert found["problems"] == []
    assert found["lost"] == 0
    assert found["duplicated"] == 0
    assert found["stuck"] == 0
    assert found["leases_left"] == 0
    assert found["views_differing"] == 0
    assert found["acknowledged"] > 0
    assert found["total_kills"] >= ROUNDS  # most runs are killed, not finished before the kill
