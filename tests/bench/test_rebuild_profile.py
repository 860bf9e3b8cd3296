"""bench/rebuild_profile.py gives each main-thread sample of py-spy's raw output to one part of a rebuild."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import rebuild_profile

MAIN = "<module> (<string>:1);main (contextledger/cli.py:61)"
REBUILD = f"{MAIN};rebuild (contextledger/application/rebuild/rebuild.py:127)"
CATCH_UP = f"{REBUILD};ViewRunner._catch_up (v.py:312)"
FOLD = f"{CATCH_UP};ViewRunner._fold (v.py:357);ContextView.fold (p.py:190)"
PROJECTOR = "Renderer.fold_row (r.py:248);Projector.fold (f.py:125)"
READ = "RecorderProjections.read_batch"


def test_each_main_thread_sample_counts_once_in_the_first_part_that_holds_it():
    """Nested parts go to the one listed first; other threads' stacks are left out; no sample is lost."""
    lines = [
        f"{MAIN};<module> (typer/main.py:1) 30",  # outside the catch-up: start-up
        f"{CATCH_UP};fill (v.py:299);{READ} (r.py:61);MsgspecMapper.decode (m.py:126) 50",
        f"{CATCH_UP};fill (v.py:299);{READ} (r.py:62) 5",
        f"{FOLD};{PROJECTOR};Projector._step (f.py:140) 40",
        f"{FOLD};{PROJECTOR};Projector._run (f.py:401);fit_card (c.py:270) 7",
        f"{FOLD};ContextView._counted (p.py:268);CardFacts.batch (c.py:127) 6",
        f"{FOLD};ContextView._counted (p.py:259) 9",
        f"{FOLD};ContextView._split (p.py:212);CountedReader.with_counts (c.py:154) 3",
        f"{CATCH_UP} 11",  # the loop's own line: the folded batch freed
        f"{CATCH_UP};ViewRunner._catch_up.<locals>.fill (v.py:299) 2",  # fill's own lines: not the loop's
        f"{REBUILD};compare_versions (b.py:197) 4",
        "Thread._bootstrap (threading.py:1002);Aside._run (a.py:30);encode_row (c.py:66) 99",  # not main
        "",
    ]

    found = rebuild_profile.attribute(lines)

    assert found == {
        "start-up and exit: imports, typer, opening the ledger, leases": 30,
        "the raw floor's own work: fetch and decode": 50,
        "the rest of the reads (notifications built)": 5,
        "the policy's fold": 40,
        "tiktoken counting the new policy's cards": 7,
        "card facts: rows read and attached": 6,
        "a batch split by session and counted": 12,
        "the catch-up's own loop (mostly freeing each folded batch)": 11,
        "the comparison": 4,
        rebuild_profile.REST: 2,
    }
    assert sum(found.values()) == 167  # every main-thread sample, the other thread's 99 left out
