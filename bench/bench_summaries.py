"""Summaries on the long real sessions: summary calls per model call, fidelity, and H and C with and without.

Each long session (texts over 4x the budget) is replayed call by call into a scratch ledger under every
preset, once with the extractive summarizer's worker running alongside and once without summaries;
the prompt-cache figures come from the same renders (projections.cache_metrics, Anthropic-like and
OpenAI-like models).

Usage: .venv/bin/python bench/bench_summaries.py [--budget 32000] [--tokenizer cl100k_base]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import contextledger
from contextledger.adapters.importers.service import import_file
from contextledger.adapters.summarizers.extractive import ExtractiveSummarizer
from contextledger.application.audit.session_replay import replay_calls
from contextledger.application.kernel.summary_log import SummaryStream
from contextledger.domain.content import text_chars
from contextledger.projections.cache_metrics import ANTHROPIC_LIKE, OPENAI_LIKE, measure, units_of
from contextledger.projections.presets import PRESETS

sys.path.insert(0, str(Path(__file__).parent))
from harness import save, transcripts


def _chars(ledger, session_id: str) -> int:
    return sum(
        text_chars(c)
        for r in ledger.events(session_id)
        if (c := getattr(r.event, "content", None)) is not None
    )


def run(budget: int, tokenizer: str) -> dict:
    folder = Path(tempfile.mkdtemp())
    source = contextledger.open_ledger(f"sqlite:///{folder / 'source.db'}")
    for path in transcripts():
        import_file(source, path)
    long_sessions = [i.session_id for i in source.sessions() if _chars(source, i.session_id) > 4 * budget]
    rows = []
    for name, policy in PRESETS.items():
        for with_summaries in (False, True):
            started = time.perf_counter()
            calls = requests = over = 0
            anthropic = openai = None
            fidelities: list[float] = []
            path_fidelities: list[float] = []
            summary_tokens: list[int] = []
            for session_id in long_sessions:
                scratch = contextledger.open_ledger("memory://")
                contexts = []
                for call in replay_calls(
                    source,
                    session_id,
                    scratch,
                    policy,
                    budget=budget,
                    make_summarizer=(lambda c: ExtractiveSummarizer(counter=c)) if with_summaries else None,
                    tokenizer=tokenizer,
                ):
                    contexts.append(call.context)
                    requests += call.requested is not None
                    over += call.context.tokens > call.context.budget
                calls += len(contexts)
                units = [units_of(c) for c in contexts]
                a, o = measure(units, ANTHROPIC_LIKE), measure(units, OPENAI_LIKE)
                anthropic = a if anthropic is None else anthropic + a
                openai = o if openai is None else openai + o
                for artifact in SummaryStream(scratch.log, session_id).artifacts():
                    if artifact.fidelity is not None:
                        fidelities.append(artifact.fidelity.overall)
                        path_fidelities.append(artifact.fidelity.paths)
                    if artifact.tokens is not None:
                        summary_tokens.append(artifact.tokens)
            rows.append(
                {
                    "preset": name,
                    "summaries": with_summaries,
                    "sessions": len(long_sessions),
                    "calls": calls,
                    "summary_calls": requests,
                    "calls_per_summary_call": round(calls / requests, 1) if requests else None,
                    "over_budget_calls": over,
                    "H_anthropic": round(anthropic.hit_ratio, 3),
                    "C_anthropic": round(anthropic.cost),
                    "breaks": anthropic.prefix_breaks,
                    "H_openai": round(openai.hit_ratio, 3),
                    "C_openai": round(openai.cost),
                    "fidelity_overall_median": round(statistics.median(fidelities), 3)
                    if fidelities
                    else None,
                    "fidelity_paths_median": round(statistics.median(path_fidelities), 3)
                    if path_fidelities
                    else None,
                    "summary_tokens_max": max(summary_tokens) if summary_tokens else None,
                    "seconds": round(time.perf_counter() - started, 1),
                }
            )
            print(rows[-1], flush=True)
    return {"budget": budget, "tokenizer": tokenizer, "long_sessions": long_sessions, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=32_000)
    parser.add_argument("--tokenizer", default="cl100k_base")
    args = parser.parse_args()
    result = run(args.budget, args.tokenizer)
    save("summaries", result)
    print(
        f"{'preset':<13}{'summaries':<10}{'calls':>6}{'sum.calls':>10}{'H':>7}{'C':>10}{'breaks':>7}{'fid.':>6}"
    )
    for r in result["rows"]:
        print(
            f"{r['preset']:<13}{r['summaries']!s:<10}{r['calls']:>6}{r['summary_calls']:>10}"
            f"{r['H_anthropic']:>7}{r['C_anthropic']:>10}{r['breaks']:>7}"
            f"{r['fidelity_overall_median'] or '':>6}"
        )


if __name__ == "__main__":
    main()
