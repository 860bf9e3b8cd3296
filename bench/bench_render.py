"""Render benchmarks: latency at 1k/10k/100k events and a 200k-token context, new processes, floors.

Run: .venv/bin/python bench/bench_render.py [--quick]

Cache figures on the transcripts (every preset and peer) are in bench_policies.py.
"""

from __future__ import annotations

import argparse
import json
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
from contextledger.application.render.renderer import Renderer

sys.path.insert(0, str(Path(__file__).parent))
from floor import WarmFloor, cold_render_floor
from harness import percentile, save, spawn_medians, time_each

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


def render_latency(size: int, budget: int, samples: int, spawns: int, folder: Path) -> dict[str, float]:
    """Warm and new-process render timings of a ``size``-event session, next to sqlite3+msgspec floors."""
    db = folder / f"render-{size}-{budget}.db"
    with contextledger.open_ledger(f"sqlite:///{db}") as ledger:
        session_id = build_session(ledger, size, seed=size)
        renderer = Renderer(ledger)
        start = time.perf_counter()
        context = renderer.render(session_id, "default", budget=budget)
        first = time.perf_counter() - start
        warm = time_each(lambda: renderer.render(session_id, "default", budget=budget), samples)
        # Not a floor: only turning the already rendered context into the request body.
        encode_only = time_each(lambda: msgspec.json.encode(to_openai(context)), samples)
        shown = list(dict.fromkeys(s for m in context.messages for s in m.sources))
        body = cold_render_floor(str(db), session_id, shown)
        messages = msgspec.json.decode(body)["messages"]
        floor = WarmFloor(str(db), session_id, ledger.version(session_id), messages)
        counter = iter(range(samples))
        floor_steps: list[float] = []

        def append_and_render() -> None:
            ledger.add_user_message(session_id, f"follow-up {next(counter)} " + _text(random.Random(1), 30))
            renderer.render(session_id, "default", budget=budget)
            begin = time.perf_counter()
            floor.step()
            floor_steps.append(time.perf_counter() - begin)

        incremental = time_each(append_and_render, samples)
        floor.close()
        context = renderer.render(session_id, "default", budget=budget)
        shown = list(dict.fromkeys(s for m in context.messages for s in m.sources))
    cold_floor = time_each(lambda: cold_render_floor(str(db), session_id, shown), max(5, samples // 10))
    shown_file = folder / f"shown-{size}-{budget}.json"
    shown_file.write_text(json.dumps(shown))
    # A new process on the same file: it catches up from the persisted snapshot.
    new_render = spawn_medians("render", [f"sqlite:///{db}", session_id, str(budget)], spawns)
    new_floor = spawn_medians("floor", [str(db), session_id, str(shown_file)], spawns)
    return {
        "events": size,
        "budget": budget,
        "context_tokens": context.tokens,
        "context_messages": len(context.messages),
        "first_render_s": first,
        "warm_p50_ms": statistics.median(warm) * 1000,
        "warm_p99_ms": percentile(warm, 0.99) * 1000,
        "append_render_p50_ms": statistics.median(incremental) * 1000,
        "append_render_p99_ms": percentile(incremental, 0.99) * 1000,
        "encode_only_p50_ms": statistics.median(encode_only) * 1000,
        "warm_floor_step_p50_ms": statistics.median(floor_steps) * 1000,
        "cold_floor_in_process_p50_ms": statistics.median(cold_floor) * 1000,
        "new_process_render": new_render,
        "new_process_floor": new_floor,
    }


def main() -> None:
    """Run the render benchmarks and write bench/results/render.json."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="smaller sessions and fewer samples")
    args = parser.parse_args()
    samples = 30 if args.quick else 200
    spawns = 5 if args.quick else 15
    sizes = (1_000, 10_000) if args.quick else (1_000, 10_000, 100_000)
    with tempfile.TemporaryDirectory() as tmp:
        latency = [render_latency(size, 32_000, samples, spawns, Path(tmp)) for size in sizes]
        latency.append(render_latency(10_000, 200_000, samples, spawns, Path(tmp)))
    base = latency[0]
    for row in latency:
        child, floor = row["new_process_render"], row["new_process_floor"]
        print(
            f"{row['events']:>7} events, budget {row['budget']:>7}: context {row['context_tokens']:>7} tok "
            f"/{row['context_messages']:>5} msgs; first render {row['first_render_s']:.2f} s; warm p50 "
            f"{row['warm_p50_ms']:.2f} ms p99 {row['warm_p99_ms']:.2f} ms (encode only "
            f"{row['encode_only_p50_ms']:.2f} ms); append+render p50 {row['append_render_p50_ms']:.2f} ms "
            f"p99 {row['append_render_p99_ms']:.2f} ms "
            f"(x{row['append_render_p50_ms'] / base['append_render_p50_ms']:.2f} of 1k; "
            f"warm floor step {row['warm_floor_step_p50_ms']:.2f} ms)"
        )
        print(
            f"{'':>9}new process, medians of {child['samples']}: render + payload + encode "
            f"{child['op_ms']:.1f} ms in the child (render alone {child['render_only_ms']:.1f} ms; "
            f"before it: import {child['import_ms']:.0f} ms, open {child['open_ms']:.1f} ms, Renderer "
            f"{child['renderer_ms']:.0f} ms; spawn to rendered {child['since_spawn_ms']:.0f} ms), "
            f"whole process {child['process_wall_ms']:.0f} ms; floor (sqlite3+msgspec) "
            f"{floor['op_ms']:.1f} ms in the child, whole process {floor['process_wall_ms']:.0f} ms; "
            f"floor in a warm process {row['cold_floor_in_process_p50_ms']:.1f} ms"
        )
    print(f"results: {save('render', {'latency': latency})}")


if __name__ == "__main__":
    main()
