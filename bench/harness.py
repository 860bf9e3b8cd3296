"""Small benchmark helpers: timing, percentiles, machine facts and result files."""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).with_name("results")


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
    """Facts that make a result comparable: cores, load, Python."""
    return {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load1": round(os.getloadavg()[0], 2),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def save(name: str, payload: dict[str, Any]) -> Path:
    """Write a result file under bench/results and return its path."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({"machine": machine(), **payload}, indent=2) + "\n")
    return path
