"""The benches' peak memory of a child process is the child's own, not its parent's (bench/harness.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import harness

MIB = 1024 * 1024


def test_a_child_of_a_large_parent_reports_its_own_peak():
    """A child run with ``PEAK_KIB`` first reports far less than the 160 MiB its parent holds at the fork."""
    held = bytearray(160 * MIB)
    held[::4096] = b"x" * len(held[::4096])  # every page touched: resident in the parent
    assert harness.peak_kib() >= 160 * 1024
    code = harness.PEAK_KIB + "print(peak_kib())\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    child = int(done.stdout.strip())
    assert 0 < child < 100 * 1024, f"the child reported {child} KiB"
