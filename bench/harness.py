"""Small benchmark helpers: timing, percentiles, machine facts and result files."""

from __future__ import annotations

import inspect
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).with_name("results")

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "transcripts"
"""The real transcripts a bare clone holds (the benches' sessions unless ``TRANSCRIPTS`` names others)."""

TRANSCRIPTS = Path(os.environ.get("CONTEXTLEDGER_BENCH_TRANSCRIPTS") or FIXTURES)
"""The folder of transcripts the benches import: ``FIXTURES``, or the one ``CONTEXTLEDGER_BENCH_TRANSCRIPTS``
names, so that every figure can be measured again on sessions the code was never tuned on (any format
``import_file`` detects; ``FORMATS.md`` and ``PROVENANCE.md`` are skipped)."""

NOT_TRANSCRIPTS = frozenset({"FORMATS.md", "PROVENANCE.md"})
"""Files of a transcripts folder that describe it."""


def transcripts() -> list[Path]:
    """The transcript files of ``TRANSCRIPTS``, sorted by name."""
    return sorted(p for p in TRANSCRIPTS.iterdir() if p.is_file() and p.name not in NOT_TRANSCRIPTS)


def percentile(samples: list[float], q: float) -> float:
    """Return the q-quantile (0..1) of samples by nearest rank."""
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def time_each(action: Callable[[], object], repeat: int) -> list[float]:
    """Run ``action`` ``repeat`` times and return each duration in seconds."""
    durations = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        durations.append(time.perf_counter() - start)
    return durations


def median_of_runs(run: Callable[[], float], runs: int = 5) -> tuple[float, float, float]:
    """Run a measurement ``runs`` times; return (median, min, max)."""
    values = [run() for _ in range(runs)]
    return statistics.median(values), min(values), max(values)


def machine() -> dict[str, Any]:
    """Facts that make a result comparable: processor, cores, memory, load, Python, and the code measured."""
    return {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "cpu": cpu_model(),
        "memory_gib": memory_gib(),
        "load1": round(os.getloadavg()[0], 2),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "commit": commit(),
    }


def cpu_model() -> str:
    """The processor's model name (Linux ``/proc/cpuinfo``; else what ``platform`` knows, or "unknown")."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:  # noqa: PTH123
            for line in info:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def memory_gib() -> float | None:
    """The machine's memory in GiB (Linux ``/proc/meminfo``), or None where it cannot be read."""
    try:
        with open("/proc/meminfo", encoding="ascii") as info:  # noqa: PTH123
            for line in info:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / (1024 * 1024), 1)
    except OSError:
        pass
    return None


def commit(root: Path | None = None) -> str | None:
    """The checkout's commit (short), with "+changes" when tracked files outside ``bench/results`` differ.

    The code a result was measured on ("the working tree" of ``--before`` comparisons). The benches rewrite
    ``bench/results`` as they run, which is not a change of the code measured. ``root``: the checkout (this
    repository's by default). None outside a git checkout.
    """
    root = root or Path(__file__).resolve().parents[1]
    git = shutil.which("git")
    if git is None:
        return None
    head = subprocess.run(
        [git, "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    )
    if head.returncode:
        return None
    changed = subprocess.run(
        [git, "-C", str(root), "status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench/results"],
        capture_output=True,
        text=True,
        check=False,
    )
    return head.stdout.strip() + ("+changes" if changed.stdout.strip() else "")


def peak_kib() -> int:
    """This process's own peak resident set size in KiB (Linux ``VmHWM``; else ``ru_maxrss``).

    ``ru_maxrss`` of a process started by ``subprocess`` also counts its parent's pages at the fork (Linux
    keeps the high-water mark across ``execve``): a child of a bench that had built a 1M-event session read
    161 MiB where it used 48. ``VmHWM`` belongs to the process's own memory, which ``execve`` starts anew.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:  # noqa: PTH123 - also run alone (python -c)
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    import resource  # noqa: PLC0415 - only where /proc is missing

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def peak_mib() -> float:
    """``peak_kib`` in MiB."""
    return peak_kib() / 1024


PEAK_KIB = inspect.getsource(peak_kib)
"""``peak_kib``'s source, to put first in the code of a child run with ``python -c``."""


def save(name: str, payload: dict[str, Any]) -> Path:
    """Write a result file under bench/results and return its path.

    ``payload["machine"]``, when the caller gathered the facts already (to print them), is kept; else
    ``machine()`` gathers them here (once: reading the commit runs git twice).
    """
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    facts = payload["machine"] if "machine" in payload else machine()
    path.write_text(json.dumps({**payload, "machine": facts}, indent=2) + "\n")
    return path


def child_env(pythonpath: str | None) -> dict[str, str]:
    """A child's environment: ``pythonpath`` (a ``--before`` package) or none, and compiled modules kept.

    An installed package has its modules compiled (pip writes them); ``PYTHONDONTWRITEBYTECODE`` (set on
    some machines) would make every start compile the whole package again, about 0.1 s of each figure.
    """
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return env


def copy_ledger(source: Path, target: Path) -> None:
    """Copy a ledger file for a timed run, and write the copy to disk first (ADR 0074).

    ``shutil.copy`` leaves the whole copy in the page cache, not yet written. On ext4 (ordered data), the
    first ``fsync`` of any file in the same journal transaction (the run's first SQLite commit: its WAL)
    then writes the copy out too: 0.23-0.26 s for a 200 MB ledger here, charged to the run timed next. A
    ledger a user rebuilds has no other program's copy waiting to be written, so the copy is synced
    before it is timed. A write-ahead log of an earlier run left beside ``target`` is removed first.
    """
    for suffix in ("-wal", "-shm"):
        target.with_name(target.name + suffix).unlink(missing_ok=True)
    shutil.copy(source, target)
    with target.open("rb+") as copy:
        os.fsync(copy.fileno())


def child_json(args: list[str], pythonpath: str | None = None) -> dict[str, Any]:
    """Run ``python ARGS`` in a fresh process (``child_env``); return the JSON object it printed last.

    Raises ``RuntimeError`` with the end of the child's stderr when it fails.
    """
    done = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=child_env(pythonpath), check=False
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


CHILD = Path(__file__).with_name("child.py")


def spawn(op: str, *args: str) -> dict[str, float]:
    """Run one operation in a fresh Python process (bench/child.py); return its timings in seconds.

    ``process_wall_s`` is measured here, from just before the spawn to the child's exit; the child
    reports ``import_s`` (from its first line), ``open_s``, ``op_s`` (the operation alone),
    ``since_spawn_s`` (spawn to the end of the operation) and ``in_child_s``.
    """
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(CHILD), op, str(time.time_ns()), *args],
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - start
    if done.returncode != 0:
        msg = f"child {op} failed ({done.returncode}): {done.stderr.strip()[-2000:]}"
        raise RuntimeError(msg)
    timings: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    timings["process_wall_s"] = wall
    return timings


def spawn_medians(op: str, args: list[str], samples: int) -> dict[str, float]:
    """Median of each timing over ``samples`` fresh processes, in milliseconds (``*_ms`` keys)."""
    runs = [spawn(op, *args) for _ in range(samples)]
    keys = sorted({k for r in runs for k in r})
    out = {k.removesuffix("_s") + "_ms": statistics.median(r[k] for r in runs if k in r) * 1000 for k in keys}
    out["samples"] = samples
    return out
