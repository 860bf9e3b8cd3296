"""The benches' machine facts name the processor, the memory and the code measured (bench/harness.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import harness


def _git(root: Path, *args: str) -> str:
    git = shutil.which("git")
    assert git is not None, "the benches' commit is read with git"
    done = subprocess.run(
        [git, "-c", "user.name=bench", "-c", "user.email=bench@example.invalid", "-C", str(root), *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def test_the_commit_is_marked_changed_by_code_and_not_by_results(tmp_path):
    """A rewritten result file leaves the commit clean; a changed source file marks it "+changes"."""
    (tmp_path / "bench" / "results").mkdir(parents=True)
    (tmp_path / "bench" / "results" / "scale.json").write_text("{}\n")
    (tmp_path / "module.py").write_text("x = 1\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "start")
    head = _git(tmp_path, "rev-parse", "--short", "HEAD")
    assert harness.commit(tmp_path) == head
    (tmp_path / "bench" / "results" / "scale.json").write_text('{"after": []}\n')
    (tmp_path / "notes.txt").write_text("untracked\n")
    assert harness.commit(tmp_path) == head
    (tmp_path / "module.py").write_text("x = 2\n")
    assert harness.commit(tmp_path) == f"{head}+changes"


def test_outside_a_checkout_there_is_no_commit(tmp_path):
    """A folder that is not a git checkout records no commit rather than failing the bench."""
    assert harness.commit(tmp_path) is None


def test_machine_facts_name_the_processor_and_memory():
    """The processor is named as /proc/cpuinfo names it; the memory agrees with the kernel's page count."""
    facts = harness.machine()
    cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    assert facts["cpu"]
    assert any(line.startswith("model name") and line.endswith(facts["cpu"]) for line in cpuinfo.splitlines())
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024**3
    assert abs(facts["memory_gib"] - physical) <= 0.1
    assert facts["cpus"] >= 1
    assert facts["commit"] == harness.commit()


def test_a_result_keeps_the_facts_its_bench_gathered(tmp_path, monkeypatch):
    """``save`` keeps facts a bench gathered to print, and gathers them itself for a bench that did not."""
    monkeypatch.setattr(harness, "RESULTS", tmp_path)
    printed = {**harness.machine(), "load1": 7.5}
    kept = json.loads(harness.save("kept", {"rows": [], "machine": printed}).read_text())
    assert kept["machine"] == printed
    gathered = json.loads(harness.save("gathered", {"rows": []}).read_text())
    assert gathered["machine"]["cpu"] == printed["cpu"]
    assert gathered["machine"]["commit"] == printed["commit"]
