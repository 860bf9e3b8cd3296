"""Render benchmarks: latency at 1k/10k/100k events and a 200k-token context; cache metrics on transcripts.

Run: .venv/bin/python bench/bench_render.py [--quick] [--skip-latency] [--skip-transcripts]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import contextledger
import msgspec
from contextledger.adapters.formats.openai import to_openai
from contextledger.adapters.formats.pairing import check_openai_pairing
from contextledger.adapters.importers.service import import_files
from contextledger.application.renderer import Renderer
from contextledger.domain.events import AssistantMessageAdded, UserMessageAdded
from contextledger.projections.cache_metrics import (
    ANTHROPIC_LIKE,
    OPENAI_LIKE,
    CacheTotals,
    measure,
    units_of,
)

sys.path.insert(0, str(Path(__file__).parent))
from harness import percentile, save, time_each

TRANSCRIPTS = Path(__file__).resolve().parents[2] / "shared" / "transcripts"
WORDS = [
    "agent",
    "context",
    "ledger",
    "token",
    "budget",
    "tool",
    "result",
    "file",
    "test",
    "error",
    "patch",
    "diff",
    "function",
    "module",
]

# research/peer-baselines.md, budget 32,000 tokens, 230 sessions / 3,597 calls (Anthropic-like pricing).
PEERS_32K = {
    "unmanaged": {"H": 0.959, "C_ratio": 1.000, "breaks": 0},
    "trim_messages": {"H": 0.855, "C_ratio": 1.311, "breaks": 90},
    "masking": {"H": 0.690, "C_ratio": 1.873, "breaks": 1166},
    "window_per_turn": {"H": 0.832, "C_ratio": 1.561, "breaks": 127},
    "chunked_oracle": {"H": 0.934, "C_ratio": 0.830, "breaks": 20},
}


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def synthetic_messages(rng: random.Random, events: int) -> list[dict[str, Any]]:
    """A coding-agent-like stream: a user turn, then steps of one call and its result."""
    messages: list[dict[str, Any]] = []
    call = 0
    while len(messages) < events - 1:
        messages.append({"role": "user", "content": _text(rng, 40)})
        for _ in range(rng.randint(2, 6)):
            call += 1
            messages.append(
                {
                    "role": "assistant",
                    "content": _text(rng, 20),
                    "tool_calls": [
                        {"id": f"c{call}", "name": rng.choice(["read", "run"]), "arguments": "{}"}
                    ],
                }
            )
            size = rng.choice([30, 80, 150, 400, 1500])
            messages.append({"role": "tool", "call_id": f"c{call}", "content": _text(rng, size)})
    while messages and messages[-1]["role"] == "assistant":
        messages.pop()
    return messages[: events - 1] if messages[events - 2]["role"] != "assistant" else messages[: events - 2]


def build_session(ledger: contextledger.Ledger, events: int, seed: int) -> str:
    """Start a session and append ``events`` synthetic events in batches."""
    rng = random.Random(seed)
    session_id = ledger.start_session(system_prompt="You are a coding agent. " * 20, model="bench")
    messages = synthetic_messages(rng, events)
    for start in range(0, len(messages), 1000):
        ledger.append_many(session_id, messages[start : start + 1000])
    return session_id


def render_latency(size: int, budget: int, samples: int, folder: Path) -> dict[str, float]:
    """p50/p99 of a warm render at the head, and of append-one-event-then-render."""
    with contextledger.open_ledger(f"sqlite:///{folder / f'render-{size}-{budget}.db'}") as ledger:
        session_id = build_session(ledger, size, seed=size)
        renderer = Renderer(ledger)
        start = time.perf_counter()
        context = renderer.render(session_id, "default", budget=budget)
        first = time.perf_counter() - start
        warm = time_each(lambda: renderer.render(session_id, "default", budget=budget), samples)
        counter = iter(range(samples))

        def append_and_render() -> None:
            ledger.add_user_message(session_id, f"follow-up {next(counter)} " + _text(random.Random(1), 30))
            renderer.render(session_id, "default", budget=budget)

        incremental = time_each(append_and_render, samples)
        # A new process on the same ledger: no state in memory, it catches up from the persisted snapshot.
        start = time.perf_counter()
        Renderer(ledger).render(session_id, "default", budget=budget)
        restart = time.perf_counter() - start
        # The raw limit: only turning the already-rendered context into the wire payload and its bytes.
        raw = time_each(lambda: msgspec.json.encode(to_openai(context)), samples)
    return {
        "events": size,
        "budget": budget,
        "context_tokens": context.tokens,
        "context_messages": len(context.messages),
        "first_render_s": first,
        "new_process_first_render_s": restart,
        "warm_p50_ms": statistics.median(warm) * 1000,
        "warm_p99_ms": percentile(warm, 0.99) * 1000,
        "append_render_p50_ms": statistics.median(incremental) * 1000,
        "append_render_p99_ms": percentile(incremental, 0.99) * 1000,
        "raw_payload_encode_p50_ms": statistics.median(raw) * 1000,
        "warm_render_over_raw": statistics.median(warm) / statistics.median(raw),
    }


def transcript_metrics(budget: int, policy: str) -> dict[str, Any]:
    """Render before every assistant message of every transcript session; cache, cost and safety figures."""
    files = sorted(p for p in TRANSCRIPTS.iterdir() if p.suffix in {".json", ".jsonl", ".traj", ".md"})
    files = [p for p in files if p.name not in {"FORMATS.md", "PROVENANCE.md"}]
    with contextledger.open_ledger("memory://") as ledger:
        import_files(ledger, [str(p) for p in files])
        renderer = Renderer(ledger)
        totals = {"managed": [], "unmanaged": []}
        calls = over = orphans = empty = task_dropped = 0
        for info in ledger.sessions():
            events = ledger.events(info.session_id)
            first_user = next((r.seq for r in events if isinstance(r.event, UserMessageAdded)), None)
            managed, unmanaged = [], []
            for recorded in events:
                if not isinstance(recorded.event, AssistantMessageAdded) or recorded.seq < 2:
                    continue
                calls += 1
                context = renderer.render(info.session_id, policy, at=recorded.seq - 1, budget=budget)
                managed.append(units_of(context))
                over += context.tokens > context.budget
                orphans += bool(check_openai_pairing(to_openai(context)))
                empty += not context.messages
                if first_user is not None and first_user < recorded.seq:
                    shown = {s for m in context.messages for s in m.sources}
                    task_dropped += first_user not in shown
                full = renderer.render(info.session_id, policy, at=recorded.seq - 1, budget=10**9)
                unmanaged.append(units_of(full))
            totals["managed"].append(managed)
            totals["unmanaged"].append(unmanaged)
    result: dict[str, Any] = {
        "policy": policy,
        "budget": budget,
        "sessions": len(totals["managed"]),
        "calls": calls,
    }
    for model in (ANTHROPIC_LIKE, OPENAI_LIKE):
        figures = {}
        for name in ("managed", "unmanaged"):
            acc = CacheTotals(model=model)
            for prompts in totals[name]:
                acc = acc + measure(prompts, model)
            figures[name] = acc
        result[model.name] = {
            "H": figures["managed"].hit_ratio,
            "C": figures["managed"].cost,
            "C_unmanaged": figures["unmanaged"].cost,
            "C_ratio": figures["managed"].cost / figures["unmanaged"].cost,
            "input_tokens": figures["managed"].input_tokens,
            "prefix_breaks": figures["managed"].prefix_breaks,
            "H_unmanaged": figures["unmanaged"].hit_ratio,
        }
    result |= {
        "over_budget": over,
        "orphaned_calls": orphans,
        "empty_prompts": empty,
        "task_dropped": task_dropped,
    }
    return result


def main() -> None:
    """Run the render benchmarks and write bench/results/render.json."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="smaller sessions and fewer samples")
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--skip-transcripts", action="store_true")
    args = parser.parse_args()
    samples = 30 if args.quick else 200
    sizes = (1_000, 10_000) if args.quick else (1_000, 10_000, 100_000)
    out: dict[str, Any] = {}
    if not args.skip_latency:
        with tempfile.TemporaryDirectory() as tmp:
            latency = [render_latency(size, 32_000, samples, Path(tmp)) for size in sizes]
            latency.append(render_latency(10_000, 200_000, samples, Path(tmp)))
        out["latency"] = latency
        base = latency[0]
        for row in latency:
            print(
                f"{row['events']:>7} events, budget {row['budget']:>7}: "
                f"context {row['context_tokens']:>7} tok "
                f"/{row['context_messages']:>5} msgs; first render {row['first_render_s']:.2f} s "
                f"(new process {row['new_process_first_render_s']:.3f} s); warm p50 "
                f"{row['warm_p50_ms']:.2f} ms p99 {row['warm_p99_ms']:.2f} ms; append+render p50 "
                f"{row['append_render_p50_ms']:.2f} ms p99 {row['append_render_p99_ms']:.2f} ms; "
                f"p50 ratio to 1k: {row['append_render_p50_ms'] / base['append_render_p50_ms']:.2f}; "
                f"raw payload+encode p50 {row['raw_payload_encode_p50_ms']:.2f} ms "
                f"(warm render {row['warm_render_over_raw']:.1f}x raw)"
            )
    if not args.skip_transcripts and TRANSCRIPTS.is_dir():
        metrics = transcript_metrics(32_000, "default")
        out["transcripts_32k_default"] = metrics
        out["peers_32k"] = PEERS_32K
        anthropic = metrics["anthropic"]
        print(
            f"transcripts @32k default: {metrics['sessions']} sessions, {metrics['calls']} calls; "
            f"H {anthropic['H']:.3f}, prefix breaks {anthropic['prefix_breaks']}, C/C(unmanaged) "
            f"{anthropic['C_ratio']:.3f} (Anthropic); OpenAI H {metrics['openai']['H']:.3f} "
            f"C ratio {metrics['openai']['C_ratio']:.3f}; over budget {metrics['over_budget']}, orphans "
            f"{metrics['orphaned_calls']}, empty {metrics['empty_prompts']}, "
            f"task dropped {metrics['task_dropped']}"
        )
        for name, peer in PEERS_32K.items():
            print(
                f"  peer {name:16s} H {peer['H']:.3f}  C ratio {peer['C_ratio']:.3f}  breaks {peer['breaks']}"
            )
    print(f"results: {save('render', out)}")


if __name__ == "__main__":
    main()
