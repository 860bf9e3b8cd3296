"""`why` on a synthetic 1M-event session: build it (batched appends into SQLite), plant a fact, time `why`.

Usage::

    .venv/bin/python bench/bench_why.py [--events 1000000] [--runs 5] [--db /tmp/why.db]
        [--texts varied|repeat] [--index-only] [--build-only] [--no-floor]

``--texts varied`` (the default) draws distinct, realistic tool results (``Texts``); ``--index-only``
times the text index alone (ADR 0040) with its peak RSS, and the raw floor (every text read, then
scanned in memory; SQLite FTS5 trigram) in the same run.

The session is a coding-agent-like stream (a user turn, then steps of one call and its result); one
tool result in the middle carries a planted fact. Model calls are recorded with the default policy at
a few positions after it (a real agent records one per call; a few are enough to trace the fact).
Each `why` (by position, and by text) runs in a fresh process (bench/child.py is not used: the
child here times open + why); the figure is the median of ``--runs`` runs. Results land in
``bench/results/why.json``. Never run in CI.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import contextledger
from contextledger.application.audit.call_recorder import CallRecorder
from harness import PEAK_KIB, save

FACT = "the staging database password rotates on Thursdays (ticket OPS-4471)"
WORDS = ["alpha", "beta", "gamma", "delta", "file", "path", "test", "error", "value", "module", "import"]


class Texts:
    """Seeded, varied tool-result texts: Zipfian words, code identifiers, paths, numbers, hashes.

    Every text is distinct (line numbers, ids and hashes vary), so a chunk of 4,096 events holds tens
    of thousands of distinct words, as a real coding session does; ``repeat`` gives the old texts
    (60 of 11 words) for comparison.
    """

    def __init__(self, seed: int = 7, vocabulary: int = 40_000, *, repeat: bool = False) -> None:
        """Draw the vocabulary (pronounceable pseudo-words) and its Zipf weights (s = 1.07)."""
        self.rng = random.Random(seed)
        self.repeat = repeat
        syllables = [c + v for c in "bcdfghklmnprstvwz" for v in "aeiou"] + ["str", "ing", "ion", "er"]
        words = set()
        while len(words) < vocabulary:
            words.add("".join(self.rng.choice(syllables) for _ in range(self.rng.randint(1, 4))))
        self.words = sorted(words)
        self.rng.shuffle(self.words)
        self.cum = list(itertools.accumulate(1 / (rank + 1) ** 1.07 for rank in range(vocabulary)))

    def _w(self, k: int) -> list[str]:
        return self.rng.choices(self.words, cum_weights=self.cum, k=k)

    def _line(self) -> str:
        kind = self.rng.random()
        r = self.rng.randrange
        if kind < 0.45:
            return " ".join(self._w(r(4, 16)))
        a, b, c = self._w(3)
        if kind < 0.65:
            return f"    def {a}_{b}(self, {c}: int = {r(100)}) -> {b.title()}{c.title()}:"
        if kind < 0.8:
            return f"src/{a}/{b}_{c}.py:{r(1, 2000)}: {self.rng.choice(['E', 'W', 'F'])}{r(100, 999)} {a} {b}"
        if kind < 0.9:
            return f"{a}{b.title()} = {r(10**6)} + {r(10**4) / 100} # {c} 0x{self.rng.getrandbits(32):08x}"
        return f"commit {self.rng.getrandbits(64):016x} {a} {b} {c} ({r(1, 31)} Nov 2026)"

    def result(self, call: int) -> str:
        """One tool result: 3 to 40 lines."""
        if self.repeat:
            return " ".join(WORDS[(call + i) % len(WORDS)] for i in range(60))
        return "\n".join(self._line() for _ in range(self.rng.randint(3, 40)))


def _messages(texts: Texts, start_call: int, count: int, *, planted: bool) -> list[dict[str, Any]]:
    """``count`` messages: a user turn, then (call, result) steps; ``planted`` puts the fact in one."""
    out: list[dict[str, Any]] = [{"role": "user", "content": "continue with the next failing test " * 3}]
    call = start_call
    while len(out) + 2 <= count:
        call += 1
        body = texts.result(call)
        if planted and len(out) == count // 2:
            body += "\n" + FACT
        path = "a.py" if texts.repeat else f"src/{'/'.join(texts._w(2))}.py"  # noqa: SLF001
        out.append(
            {
                "role": "assistant",
                "content": "Let me check.",
                "tool_calls": [
                    {"id": f"c{call}", "name": "read_file", "arguments": json.dumps({"path": path})}
                ],
            }
        )
        out.append({"role": "tool", "call_id": f"c{call}", "content": body})
    return out


def build(db: Path, events: int, texts: Texts, batch: int = 5_000) -> dict[str, Any]:
    """Build the session in ``db``; return its id, the planted position and the build time."""
    started = time.perf_counter()
    with contextledger.open_ledger(f"sqlite:///{db}") as ledger:
        session = ledger.start_session(system_prompt="You are a coding agent.", model="bench")
        planted_at = 0
        call = 0
        while (version := ledger.version(session)) < events:
            plant = planted_at == 0 and version >= events // 2
            messages = _messages(texts, call, min(batch - 1, events - version), planted=plant)
            call += (len(messages) - 1) // 2
            positions = ledger.append_many(session, messages)
            if plant:
                planted_at = next(
                    p for p, m in zip(positions, messages, strict=True) if FACT in str(m.get("content"))
                )
            if len(messages) < 3:  # a user message alone: the last event
                break
        return {
            "session": session,
            "events": ledger.version(session),
            "planted_at": planted_at,
            "texts": "repeat" if texts.repeat else "varied",
            "build_s": round(time.perf_counter() - started, 1),
        }


def record_calls(db: Path, meta: dict[str, Any]) -> dict[str, Any]:
    """Record model calls (default policy, 16k, heuristic tokenizer) at a few results after the fact."""
    started = time.perf_counter()
    session, planted_at = meta["session"], meta["planted_at"]
    with contextledger.open_ledger(f"sqlite:///{db}") as ledger:
        renderer = contextledger.Renderer(ledger, tokenizer="heuristic")  # its counter's default memory
        recorder = CallRecorder(ledger)
        policy = contextledger.get_preset("default")
        calls = 0
        for at in (planted_at + 1, planted_at + 11, planted_at + 201, planted_at + 2_001, meta["events"]):
            context = renderer.render(session, policy, at=at, budget=16_000)
            recorder.record(context, policy)
            calls += 1
    return {"calls": calls, "record_calls_s": round(time.perf_counter() - started, 1)}


CHILD = (
    PEAK_KIB
    + """
import sys, time, json
t0 = time.perf_counter()
import contextledger
from contextledger.application.audit.forensics import why
from contextledger.application.render.renderer import Renderer
t1 = time.perf_counter()
db, session, mode, arg = sys.argv[1:5]
with contextledger.open_ledger("sqlite:///" + db) as ledger:
    t2 = time.perf_counter()
    renderer = Renderer(ledger, tokenizer="heuristic")
    if mode == "position":
        answer = why(ledger, session, "", renderer=renderer, position=int(arg))
    elif mode == "index":  # the index alone: the events holding the text, as `why` finds its carriers
        import re
        from contextledger.application.search.log_search import searchable_texts
        from contextledger.application.search.text_index import TextIndex
        pattern = re.compile(re.escape(arg), re.IGNORECASE)
        found = [r.position for r in TextIndex(ledger).scan(session, arg)
                 if any(pattern.search(t) for t, _ in searchable_texts(ledger, r.event))]
        answer = type("A", (), {"verdict": f"{len(found)} events", "entered_at": found[0] if found else None})
    else:
        answer = why(ledger, session, arg, renderer=renderer)
    t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "open_s": t2 - t1, "why_s": t3 - t2,
                  "verdict": answer.verdict, "entered_at": answer.entered_at,
                  "peak_rss_mib": peak_kib() / 1024}))
"""
)

FLOOR = (
    PEAK_KIB
    + """
import sys, time, json, re, sqlite3
import contextledger
from contextledger.application.search.log_search import searchable_texts
db, session, query = sys.argv[1:4]
with contextledger.open_ledger("sqlite:///" + db) as ledger:
    t0 = time.perf_counter()
    texts = [t for r in ledger.events(session) for t, _ in searchable_texts(ledger, r.event)]
    t1 = time.perf_counter()
pattern = re.compile(re.escape(query), re.IGNORECASE)
scans = []
for _ in range(3):
    s = time.perf_counter()
    first = next(i for i, t in enumerate(texts) if pattern.search(t))
    scans.append(time.perf_counter() - s)
needle = query.casefold()
s = time.perf_counter()
folded = next(i for i, t in enumerate(texts) if t.casefold().find(needle) >= 0)
find_s = time.perf_counter() - s
fts = sqlite3.connect(":memory:")
fts.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='trigram')")
s = time.perf_counter()
fts.executemany("INSERT INTO t(rowid, body) VALUES (?, ?)", enumerate(texts))
fts.commit()
fts_build_s = time.perf_counter() - s
s = time.perf_counter()
phrase = '"' + query.replace('"', '""') + '"'
hit = fts.execute("SELECT min(rowid) FROM t WHERE body MATCH ?", (phrase,)).fetchone()[0]
fts_query_s = time.perf_counter() - s
print(json.dumps({"read_texts_s": t1 - t0, "texts": len(texts), "chars": sum(map(len, texts)),
                  "regex_scan_s": sorted(scans)[1], "casefold_find_scan_s": find_s,
                  "fts5_trigram_build_s": fts_build_s, "fts5_trigram_query_s": fts_query_s,
                  "agree": first == folded == hit,
                  "peak_rss_mib": peak_kib() / 1024}))
"""
)


def time_why(db: Path, session: str, mode: str, arg: str, runs: int) -> dict[str, Any]:
    """Run `why` ``runs`` times, each in a fresh process; return medians and the last verdict."""
    samples: list[dict[str, Any]] = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(db), session, mode, arg],
            capture_output=True,
            text=True,
            check=True,
        )
        sample = json.loads(done.stdout.strip().splitlines()[-1])
        sample["process_wall_s"] = time.perf_counter() - start
        samples.append(sample)
    result: dict[str, Any] = {
        key: round(statistics.median(s[key] for s in samples), 4)
        for key in ("why_s", "open_s", "import_s", "process_wall_s", "peak_rss_mib")
    }
    result["why_s_min_max"] = [
        round(min(s["why_s"] for s in samples), 4),
        round(max(s["why_s"] for s in samples), 4),
    ]
    result["why_s_runs"] = [round(s["why_s"], 4) for s in samples]
    result["verdict"] = samples[-1]["verdict"]
    result["entered_at"] = samples[-1]["entered_at"]
    return result


def floor_run(db: Path, session: str, query: str) -> dict[str, Any]:
    """The raw floor in a fresh process: every text read into memory, then scanned; SQLite FTS5 trigram."""
    done = subprocess.run(
        [sys.executable, "-c", FLOOR, str(db), session, query], capture_output=True, text=True, check=True
    )
    floor: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    print("raw floor (texts in memory: regex / casefold+find scan; SQLite FTS5 trigram)", floor, flush=True)
    return floor


def index_only(args: argparse.Namespace, meta: dict[str, Any]) -> None:
    """Time the index alone: first question (builds the sketches), then questions, then the raw floor."""
    session = meta["session"]
    first = time_why(args.db, session, "index", "OPS-4471", 1)
    print("index, first question (builds the sketches)", first, flush=True)
    rows = {
        q: time_why(args.db, session, "index", q, args.runs) for q in ("OPS-4471", "rotates on thursdays")
    }
    for query, row in rows.items():
        print(f"index {query!r}", row, flush=True)
    floor = {} if args.no_floor else floor_run(args.db, session, "OPS-4471")
    for query, row in rows.items():
        if floor:
            print(f"index {query!r}: {row['why_s'] / floor['regex_scan_s']:.2f}x the in-memory regex scan")
    payload = {"label": args.label, "session": meta, "first": first, **rows, "floor": floor}
    print(f"saved {save('why_index', payload)}")


def main() -> None:
    """Build (or reuse) the session, then time `why` by position and by text."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--db", type=Path, default=Path(tempfile.gettempdir()) / "contextledger-bench-why.db")
    parser.add_argument("--label", default="")
    parser.add_argument("--texts", choices=("varied", "repeat"), default="varied")
    parser.add_argument(
        "--index-only", action="store_true", help="time the text index alone (no model calls recorded)"
    )
    parser.add_argument("--build-only", action="store_true", help="build the session, time nothing")
    parser.add_argument("--no-floor", action="store_true", help="skip the raw floor (scan and FTS5)")
    args = parser.parse_args()
    meta_path = args.db.with_suffix(".json")
    if args.db.exists() and meta_path.exists():
        meta = json.loads(meta_path.read_text())
    else:
        args.db.unlink(missing_ok=True)
        meta = build(args.db, args.events, Texts(repeat=args.texts == "repeat"))
        meta_path.write_text(json.dumps(meta))
    if args.index_only:
        index_only(args, meta)
        return
    if "calls" not in meta:
        meta |= record_calls(args.db, meta)
        meta_path.write_text(json.dumps(meta))
    print("session", meta, flush=True)
    if args.build_only:
        return
    by_position = time_why(args.db, meta["session"], "position", str(meta["planted_at"]), args.runs)
    print("why --position", by_position, flush=True)
    # The first text query of a session builds its chunk word sketches (application/search/text_index.py)
    # from the log, once; later queries, in any process, load them.
    first_text = time_why(args.db, meta["session"], "text", "OPS-4471", 1)
    print("why TEXT, first query (builds the word sketches)", first_text, flush=True)
    by_text = time_why(args.db, meta["session"], "text", "OPS-4471", args.runs)
    print("why TEXT", by_text, flush=True)
    other = time_why(args.db, meta["session"], "text", "rotates on thursdays", args.runs)
    print("why TEXT (other words)", other, flush=True)
    floor: dict[str, Any] = {}
    if not args.no_floor:
        floor = floor_run(args.db, meta["session"], "OPS-4471")
        for name, row in (("OPS-4471", by_text), ("rotates on thursdays", other)):
            print(
                f"why TEXT {name!r}: {row['why_s'] / floor['regex_scan_s']:.2f}x"
                " a regex scan of the texts held in memory"
            )
    path = save(
        "why",
        {
            "label": args.label,
            "session": meta,
            "position": by_position,
            "text_first": first_text,
            "text": by_text,
            "text_other": other,
            "floor": floor,
        },
    )
    print(f"saved {path}")


if __name__ == "__main__":
    main()
