"""Shared fixtures: ledgers on every backend, the transcripts folder, PostgreSQL availability."""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import contextledger
import psycopg
import pytest
import structlog
from contextledger.testing import CountingIds, FixedClock
from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if os.environ.get("CI") == "true" and os.environ.get("CONTEXTLEDGER_LONG") != "1":
    # CI draws the same examples every run (a landing is never blocked by a new random draw); local
    # runs and CONTEXTLEDGER_LONG=1 keep exploring new ones.
    settings.load_profile("ci")

REPO = Path(__file__).resolve().parents[1]
TRANSCRIPTS = Path(os.environ.get("CONTEXTLEDGER_TRANSCRIPTS", REPO / "tests" / "fixtures" / "transcripts"))
"""The real transcripts carried in the repository (MIT, see their PROVENANCE.md); override to test others."""
PG_BASE = os.environ.get("CONTEXTLEDGER_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


def postgres_reason() -> str | None:
    """Return why PostgreSQL tests cannot run here, or None when the server answers."""
    try:
        with psycopg.connect(PG_BASE.split("?")[0], connect_timeout=3):
            return None
    except psycopg.Error as error:
        return (
            f"PostgreSQL not reachable at {PG_BASE} ({error.__class__.__name__}); start it with "
            "'pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start' "
            "or set CONTEXTLEDGER_TEST_POSTGRES"
        )


def require_postgres() -> None:
    """Skip (or, in CI, fail) when PostgreSQL is not available."""
    reason = postgres_reason()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must run the PostgreSQL tests: {reason}")
    pytest.skip(reason)


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A PostgreSQL URL with a fresh schema, dropped afterwards."""
    require_postgres()
    schema = f"t_{uuid.uuid4().hex[:12]}"
    yield f"{PG_BASE.split('?')[0]}?schema={schema}"
    with psycopg.connect(PG_BASE.split("?")[0], autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A URL of a fresh SQLite file."""
    return f"sqlite:///{tmp_path / 'ledger.db'}"


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def any_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """One URL per backend: memory, SQLite file, PostgreSQL schema."""
    if request.param == "memory":
        yield "memory://"
    elif request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'ledger.db'}"
    else:
        yield request.getfixturevalue("pg_url")


@pytest.fixture
def ledger() -> Iterator[contextledger.Ledger]:
    """An in-memory ledger with a fixed clock and deterministic ids."""
    with contextledger.open_ledger("memory://", clock=FixedClock(), ids=CountingIds()) as opened:
        yield opened


@pytest.fixture
def transcripts() -> Path:
    """The folder of real transcripts (tests/fixtures/transcripts, carried in every clone)."""
    assert TRANSCRIPTS.is_dir(), f"no transcripts folder at {TRANSCRIPTS} (set CONTEXTLEDGER_TRANSCRIPTS)"
    return TRANSCRIPTS


@pytest.fixture(autouse=True)
def _structlog_left_as_found() -> Iterator[None]:
    """A test that runs a CLI entry point in-process configures structlog globally: undo it afterwards.

    The CLI's log handler on the library's logger (and its level) are removed as well.
    """
    yield
    structlog.reset_defaults()
    library = logging.getLogger("contextledger")
    for handler in [h for h in library.handlers if not isinstance(h, logging.NullHandler)]:
        library.removeHandler(handler)
    library.setLevel(logging.NOTSET)
