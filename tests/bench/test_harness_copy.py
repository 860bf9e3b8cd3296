"""A ledger copied for a timed run is written to disk before the run (bench/harness.py, ADR 0074)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import harness


def test_a_copied_ledger_is_synced_before_it_is_timed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The copy holds the source's bytes, and the copy itself (not the source) is fsynced once."""
    source, target = tmp_path / "cold.db", tmp_path / "warm.db"
    source.write_bytes(os.urandom(64 * 1024))
    synced: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.fstat(fd).st_ino)
        real_fsync(fd)

    monkeypatch.setattr(harness.os, "fsync", fsync)
    harness.copy_ledger(source, target)
    assert target.read_bytes() == source.read_bytes()
    assert synced == [target.stat().st_ino]
