"""Retention: what each preset keeps of planted facts over long generated sessions, card on and off.

Run: .venv/bin/python bench/bench_retention.py [--quick] [--sessions N] [--calls N] [--budgets 16000,32000]

A deterministic generator builds long agent sessions from the tool outputs of the real transcripts in
tests/fixtures (>= 80 % of tokens in tool output) and plants facts of four kinds at known positions:
user constraints stated late, identifiers from tool output, the assistant's decisions, files changed
through shell commands (plus ephemeral values), and a todo list that changes. Each session is replayed
call by call under every preset at each budget, with the extractive worker between calls, in three
modes of the same code: ``today`` (the card switched off: the policies as they were), ``card``
(shipped: in the stable prefix, refreshed at compaction points) and ``tail`` (rewritten at the end
of every call); next to unmanaged history and LangChain's ``trim_messages``. Definitions are in
docs/benchmarks.md ("Retention"). Results: bench/results/retention.json and a markdown table.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import contextledger
import structlog
from contextledger.adapters.importers.service import import_files
from contextledger.adapters.summarizers.extractive import ExtractiveSummarizer
from contextledger.application.render.renderer import Renderer
from contextledger.application.summaries.compaction import Compactor
from contextledger.application.summaries.summary_worker import SummaryWorker
from contextledger.projections.cache_metrics import ANTHROPIC_LIKE, Unit, measure, units_of
from contextledger.projections.context import RenderedContext
from contextledger.projections.policy import Policy
from contextledger.projections.presets import PRESETS

sys.path.insert(0, str(Path(__file__).parent))
from harness import save, transcripts

KINDS = ("constraint", "tool_identifier", "decision", "file_changed", "ephemeral")
MODES = ("today", "card", "tail")
_HANDLE_SPAN = ('"from": ', '"through": ')


@dataclass
class Fact:
    """A planted fact: its kind, the exact text to find, and the position of the event stating it."""

    kind: str
    text: str
    position: int = 0


@dataclass
class Plan:
    """One generated session: per call, the events to append before it, and the planted facts."""

    calls: list[list[dict[str, Any]]]
    facts: list[tuple[int, Fact]]  # (call index, fact)
    todos: list[tuple[int, list[str]]]  # (call index, the whole list of that revision)


def filler_pool() -> list[str]:
    """Tool outputs of the real transcripts (at least 400 characters), in a fixed order."""
    ledger = contextledger.open_ledger("memory://")
    files = transcripts()
    import_files(ledger, files)
    pool = []
    for info in sorted(ledger.sessions(), key=lambda i: i.session_id):
        for recorded in ledger.events(info.session_id):
            event = recorded.event
            if isinstance(event, contextledger.ToolResultRecorded):
                text = ledger.text(event.content)
                if len(text) >= 400:
                    pool.append(text)
    return sorted(set(pool))


def generate(seed: int, calls: int, pool: list[str]) -> Plan:
    """Return a deterministic session of ``calls`` model calls with planted facts (``seed`` varies it)."""
    rng = random.Random(seed)
    plan = Plan(calls=[], facts=[], todos=[])
    late = {3, 5, 7, 9, *range(40, calls, 60)}
    revision = 0
    for k in range(calls):
        events: list[dict[str, Any]] = []
        if k == 0:
            events.append(
                {"role": "user", "content": f"Session {seed}: fix the failing import tests in pkg."}
            )
        if k in late:
            tag = f"CONSTRAINT{seed}Z{k}"
            rule = rng.choice(
                ("Do not add dependencies", "Use Python 3.9 syntax only", "Never edit the vendored files")
            )
            events.append({"role": "user", "content": f"{rule} ({tag})."})
            plan.facts.append((k, Fact("constraint", tag)))
        text = f"Step {k}: checking the next part."
        if k % 12 == 6:
            tag = f"DECISION{seed}D{k}"
            text = f"I'll use the strategy {tag} instead of the regex parser."
            plan.facts.append((k, Fact("decision", tag)))
        call_id = f"s{seed}c{k}"
        body = pool[rng.randrange(len(pool))]
        body = body[: rng.randrange(2_500, 7_000)]
        if k % 30 == 15:
            revision += 1
            items = [f"item {j} of revision REV{seed}R{revision}" for j in range(4)]
            todos = [
                {"content": item, "status": "completed" if j < revision % 3 else "pending"}
                for j, item in enumerate(items)
            ]
            call = {"id": call_id, "name": "TodoWrite", "arguments": {"todos": todos}}
            plan.todos.append((k, items))
            body = "Todos updated."
        elif k % 10 == 4:
            path = f"src/pkg{seed}/edit_{k}.py"
            command = (
                f"sed -i 's/old/new/' {path}" if k % 20 == 4 else f"cat > {path} <<'EOF'\nVALUE = {k}\nEOF"
            )
            call = {"id": call_id, "name": "bash", "arguments": {"command": command}}
            plan.facts.append((k, Fact("file_changed", path)))
            body = ""
        else:
            call = {"id": call_id, "name": "bash", "arguments": {"command": f"grep -rn import pkg/part_{k}"}}
        if k % 8 == 2:
            tag = f"IDENT{seed}K{k}"
            body = (
                body[: len(body) // 2] + f"\nconfig key {tag} found in settings.\n" + body[len(body) // 2 :]
            )
            plan.facts.append((k, Fact("tool_identifier", tag)))
        if k % 6 == 1:
            tag = f"EPHEMERAL{seed}E{k}"
            body += f"\nrequest id {tag}\n"
            plan.facts.append((k, Fact("ephemeral", tag)))
        events.append({"role": "assistant", "content": text, "tool_calls": [call]})
        events.append({"role": "tool", "call_id": call_id, "content": body or "(no output)"})
        plan.calls.append(events)
    return plan


def payload_text(context: RenderedContext) -> str:
    """Every text the model reads: system prompt, messages and tool-call arguments."""
    parts = [context.system]
    for message in context.messages:
        parts.append(message.text)
        parts.extend(c.arguments for c in message.tool_calls)
    return "\n".join(parts)


def handled_positions(context: RenderedContext) -> set[int]:
    """Positions a handle in the payload names: shown messages, stubs, summaries and the card's spans."""
    named: set[int] = set()
    for message in context.messages:
        if message.kind == "summary" and len(message.sources) == 2:
            named.update(range(message.sources[0], message.sources[1] + 1))
        else:
            named.update(message.sources)
        if message.kind == "card":
            for line in message.text.splitlines():
                if all(h in line for h in _HANDLE_SPAN):
                    tail = line.rsplit("recall ", 1)[-1]
                    span = json.loads(tail)
                    named.update(range(span["from"], span["through"] + 1))
    return named


@dataclass
class Score:
    """Counts for one (policy, budget, mode): retention per kind, constraints, todo, cache and budget."""

    present: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    recoverable: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    owed: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    constraints_last: int = 0
    constraints_total: int = 0
    todo_ok: int = 0
    todo_owed: int = 0
    calls: int = 0
    over_budget: int = 0
    orphans: int = 0
    summary_calls: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    cost: float = 0.0
    breaks: int = 0

    def row(self) -> dict[str, Any]:
        """Fractions and totals as reported."""
        out: dict[str, Any] = {}
        for kind in KINDS:
            owed = self.owed[kind] or 1
            out[f"R_in_{kind}"] = self.present[kind] / owed
            out[f"R_rec_{kind}"] = self.recoverable[kind] / owed
        out["constraints_last"] = f"{self.constraints_last}/{self.constraints_total}"
        out["todo_latest"] = self.todo_ok / self.todo_owed if self.todo_owed else None
        out["H"] = self.cached_tokens / self.input_tokens if self.input_tokens else 0.0
        out["C_per_call"] = self.cost / self.calls if self.calls else 0.0
        out["breaks"] = self.breaks
        out["over_budget"] = self.over_budget
        out["orphans"] = self.orphans
        out["summary_calls_per_call"] = self.summary_calls / self.calls if self.calls else 0.0
        out["calls"] = self.calls
        return out


def _orphans(context: RenderedContext) -> int:
    open_calls: set[str] = set()
    bad = 0
    for message in context.messages:
        if message.role == "tool":
            bad += message.tool_call_id not in open_calls
            open_calls.discard(message.tool_call_id or "")
            continue
        bad += len(open_calls)
        open_calls = {c.id for c in message.tool_calls} if message.role == "assistant" else set()
    return bad + len(open_calls)


def _score_call(score: Score, plan: Plan, k: int, text: str, handled: set[int]) -> None:
    for at, fact in plan.facts:
        if at >= k:
            continue
        score.owed[fact.kind] += 1
        inside = fact.text in text
        score.present[fact.kind] += inside
        score.recoverable[fact.kind] += inside or fact.position in handled
    revisions = [(at, items) for at, items in plan.todos if at < k]
    if revisions:
        score.todo_owed += 1
        score.todo_ok += all(item in text for item in revisions[-1][1])


def policy_for(name: str, mode: str) -> Policy:
    """The preset ``name`` under ``mode``: today (no card), card (shipped) or tail."""
    card = {"today": {"enabled": False}, "card": {}, "tail": {"placement": "tail"}}[mode]
    return Policy.parse({"base": name, "name": name, "card": card})


def replay_preset(plan: Plan, policy: Policy, budget: int, score: Score) -> None:
    """Replay ``plan`` call by call under ``policy``, the extractive worker between calls."""
    ledger = contextledger.open_ledger("memory://")
    session = ledger.start_session(system_prompt="You are a coding agent.", tools=[{"name": "bash"}])
    renderer = Renderer(ledger, tokenizer="heuristic")
    summarizer = ExtractiveSummarizer(counter=renderer.counter)
    compactor = Compactor(
        ledger, renderer, summarizer=summarizer.name, summarizer_config=summarizer.config_sha
    )
    worker = SummaryWorker(ledger, renderer, summarizer, worker_id="bench")
    units: list[tuple[Unit, ...]] = []
    last = ""
    for k, events in enumerate(plan.calls):
        if k:
            context = renderer.render(session, policy, budget=budget)
            text = payload_text(context)
            _score_call(score, plan, k, text, handled_positions(context))
            units.append(units_of(context))
            score.calls += 1
            score.over_budget += context.tokens > budget
            score.orphans += _orphans(context)
            compactor.plan(session, policy, budget=budget)
            score.summary_calls += worker.run_once()
            last = text
        for event in events:
            ledger.append_many(session, [event])
            position = ledger.version(session)
            for at, fact in plan.facts:
                if at == k and not fact.position and _states(event, fact.text):
                    fact.position = position
    constraints = [f for _, f in plan.facts if f.kind == "constraint"]
    score.constraints_total += len(constraints)
    score.constraints_last += sum(f.text in last for f in constraints)
    _cache(score, units)


def _states(event: dict[str, Any], text: str) -> bool:
    return text in json.dumps(event)


def _cache(score: Score, prompts: list[tuple[Unit, ...]]) -> None:
    totals = measure(prompts, ANTHROPIC_LIKE)
    score.input_tokens += totals.input_tokens
    score.cached_tokens += totals.cached_tokens
    score.cost += totals.cost
    score.breaks += totals.prefix_breaks


def _messages(plan: Plan, upto: int) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You are a coding agent."},
        *(e for c in plan.calls[:upto] for e in c),
    ]


def _tokens(message: dict[str, Any]) -> int:
    return 4 + (len(str(message.get("content") or "")) + len(json.dumps(message.get("tool_calls", [])))) // 4


def _baseline_units(messages: list[dict[str, Any]]) -> tuple[Unit, ...]:
    return tuple(Unit(key=json.dumps(m, sort_keys=True).encode(), tokens=_tokens(m)) for m in messages)


def replay_baseline(
    plan: Plan, budget: int, score: Score, pick: Callable[[list[dict[str, Any]]], Any]
) -> None:
    """Replay ``plan`` with a peer that picks the messages to send from the whole history."""
    units = []
    last = ""
    for k in range(1, len(plan.calls)):
        chosen = pick(_messages(plan, k))
        text = "\n".join(json.dumps(m.get("content")) + json.dumps(m.get("tool_calls", [])) for m in chosen)
        handled = {_position_of(plan, m) for m in chosen}
        _score_call(score, plan, k, text, handled)
        units.append(_baseline_units(chosen))
        score.calls += 1
        score.over_budget += sum(_tokens(m) for m in chosen) > budget
        last = text
    constraints = [f for _, f in plan.facts if f.kind == "constraint"]
    score.constraints_total += len(constraints)
    score.constraints_last += sum(f.text in last for f in constraints)
    _cache(score, units)


def _position_of(plan: Plan, message: dict[str, Any]) -> int:
    del plan, message
    return -1  # a peer's payload names no position: recoverable only when present


def langchain_picker(budget: int) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None:
    """``trim_messages(strategy="last")`` to the budget, or None without langchain-core."""
    try:
        from langchain_core.messages import (  # noqa: PLC0415 - optional dev dependency
            AIMessage,
            HumanMessage,
            SystemMessage,
            ToolMessage,
            trim_messages,
        )
    except ImportError:
        return None

    def pick(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        converted: list[Any] = []
        for m in messages:
            if m["role"] == "system":
                converted.append(SystemMessage(m["content"]))
            elif m["role"] == "user":
                converted.append(HumanMessage(m["content"]))
            elif m["role"] == "assistant":
                calls = [
                    {"id": c["id"], "name": c["name"], "args": c["arguments"]}
                    for c in m.get("tool_calls", [])
                ]
                converted.append(AIMessage(m["content"], tool_calls=calls))
            else:
                converted.append(ToolMessage(m["content"], tool_call_id=m["call_id"]))
        kept = trim_messages(
            converted,
            max_tokens=budget,
            token_counter="approximate",  # noqa: S106 - a counter name, no secret
            strategy="last",
            include_system=True,
            start_on="human",
        )
        by_id = {id(c): m for c, m in zip(converted, messages, strict=True)}
        return [by_id[id(c)] for c in kept]

    return pick


def run(
    sessions: int, calls: int, budgets: list[int], presets: list[str], *, peers: bool = True
) -> dict[str, Any]:
    """Replay every generated session under every preset, mode and budget; return the result rows."""
    pool = filler_pool()
    plans = [generate(seed, calls, pool) for seed in range(1, sessions + 1)]
    tool_share = _tool_share(plans)
    rows: list[dict[str, Any]] = []
    for budget in budgets:
        for name in presets:
            for mode in MODES:
                score = Score()
                for plan in plans:
                    replay_preset(_fresh(plan), policy_for(name, mode), budget, score)
                rows.append({"budget": budget, "policy": name, "mode": mode, **score.row()})
                print(_line(rows[-1]), flush=True)
        baselines: list[tuple[str, Callable[[list[dict[str, Any]]], Any] | None]] = [
            ("unmanaged", lambda m: m),
            ("langchain trim_messages", langchain_picker(budget)),
        ]
        for label, pick in baselines:
            if pick is None or not peers:
                continue
            score = Score()
            for plan in plans:
                replay_baseline(_fresh(plan), budget, score, pick)
            rows.append({"budget": budget, "policy": label, "mode": "peer", **score.row()})
            print(_line(rows[-1]), flush=True)
    return {"sessions": sessions, "calls": calls, "tool_token_share": tool_share, "rows": rows}


def fixture_cache(budgets: list[int], presets: list[str]) -> list[dict[str, Any]]:
    """H, C, prefix breaks and over-budget calls on the real transcripts of tests/fixtures, per mode.

    Each assistant message of each session is a model call whose prompt is the render just before it
    (no summary worker: the transcripts' own events only), as bench_policies replays them.
    """
    ledger = contextledger.open_ledger("memory://")
    files = transcripts()
    import_files(ledger, files)
    sessions = sorted(i.session_id for i in ledger.sessions())
    calls = {
        s: [
            r.position
            for r in ledger.events(s)
            if isinstance(r.event, contextledger.AssistantMessageAdded) and r.position > 2
        ]
        for s in sessions
    }
    rows = []
    for budget in budgets:
        for name in presets:
            for mode in MODES:
                policy = policy_for(name, mode)
                renderer = Renderer(ledger, tokenizer="heuristic")
                score = Score()
                for session in sessions:
                    prompts = []
                    for seq in calls[session]:
                        context = renderer.render(session, policy, budget=budget, at=seq - 1)
                        prompts.append(units_of(context))
                        score.calls += 1
                        score.over_budget += context.tokens > budget
                        score.orphans += _orphans(context)
                    _cache(score, prompts)
                row = score.row()
                rows.append(
                    {
                        "budget": budget,
                        "policy": name,
                        "mode": mode,
                        **{
                            k: row[k]
                            for k in ("H", "C_per_call", "breaks", "over_budget", "orphans", "calls")
                        },
                    }
                )
                print(
                    f"fixtures @{budget} {name:>12} {mode:>5}: H {row['H']:.4f} "
                    f"C/call {row['C_per_call']:.1f} "
                    f"breaks {row['breaks']} over {row['over_budget']} orphans {row['orphans']}",
                    flush=True,
                )
    return rows


def fixture_table(rows: list[dict[str, Any]]) -> str:
    """The markdown table of the fixture cache figures, each next to today's (card off)."""
    today = {(r["budget"], r["policy"]): r for r in rows if r["mode"] == "today"}
    lines = [
        (
            "| budget | policy | mode | H | H - today | C per call | C vs today | breaks | over budget "
            "| orphans |"
        )
    ]
    lines.append("|" + "---|" * 10)
    for r in rows:
        base = today[(r["budget"], r["policy"])]
        ratio = r["C_per_call"] / base["C_per_call"] if base["C_per_call"] else 0.0
        lines.append(
            f"| {r['budget']} | {r['policy']} | {r['mode']} | {r['H']:.4f} | {r['H'] - base['H']:+.4f} | "
            f"{r['C_per_call']:.1f} | {ratio:.3f} | {r['breaks']} | {r['over_budget']} | {r['orphans']} |"
        )
    return "\n".join(lines)


def _fresh(plan: Plan) -> Plan:
    return Plan(
        calls=plan.calls,
        facts=[(k, Fact(f.kind, f.text)) for k, f in plan.facts],
        todos=plan.todos,
    )


def _tool_share(plans: list[Plan]) -> float:
    tool = total = 0
    for plan in plans:
        for events in plan.calls:
            for event in events:
                size = _tokens(event)
                total += size
                tool += size if event["role"] == "tool" else 0
    return tool / total if total else 0.0


def _pct(value: Any) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _line(r: dict[str, Any]) -> str:
    return (
        f"@{r['budget']} {r['policy']:>23} {r['mode']:>5}: constraints@last {r['constraints_last']:>6} "
        f"todo {_pct(r['todo_latest']):>4} R_in c/i/d/f/e "
        + "/".join(_pct(r[f"R_in_{k}"]) for k in KINDS)
        + " R_rec "
        + "/".join(_pct(r[f"R_rec_{k}"]) for k in KINDS)
        + f" H {r['H']:.3f} C/call {r['C_per_call']:.0f} over {r['over_budget']} orphans {r['orphans']}"
        f" sum/call {r['summary_calls_per_call']:.2f}"
    )


def table(result: dict[str, Any]) -> str:
    """The markdown table of a result."""
    head = (
        "| budget | policy | mode | constraints at last call | latest todo | R_in constraint | R_in tool id "
        "| R_in decision | R_in file changed | R_in ephemeral | R_rec (c/i/d/f/e) | H | C per call "
        "| C vs today | over budget | orphans | summary calls per call |"
    )
    lines = [head, "|" + "---|" * 18]
    today = {(r["budget"], r["policy"]): r for r in result["rows"] if r["mode"] == "today"}
    for r in result["rows"]:
        base = today.get((r["budget"], r["policy"]))
        ratio = f"{r['C_per_call'] / base['C_per_call']:.3f}" if base and base["C_per_call"] else "-"
        lines.append(
            f"| {r['budget']} | {r['policy']} | {r['mode']} | {r['constraints_last']} | "
            f"{_pct(r['todo_latest'])} | "
            + " | ".join(_pct(r[f"R_in_{k}"]) for k in KINDS)
            + " | "
            + "/".join(_pct(r[f"R_rec_{k}"]) for k in KINDS)
            + f" | {r['H']:.3f} | {r['C_per_call']:.0f} | {ratio} | {r['over_budget']} | {r['orphans']} | "
            f"{r['summary_calls_per_call']:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    """Parse arguments, run, save bench/results/retention.json, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 sessions of 120 calls")
    parser.add_argument("--sessions", type=int, default=None)
    parser.add_argument("--calls", type=int, default=None)
    parser.add_argument("--budgets", default="16000,32000")
    parser.add_argument("--presets", default=",".join(PRESETS))
    parser.add_argument("--no-fixtures", action="store_true", help="skip the cache figures on tests/fixtures")
    parser.add_argument("--no-peers", action="store_true", help="skip unmanaged history and trim_messages")
    parser.add_argument(
        "--only-fixtures", action="store_true", help="only the cache figures on tests/fixtures"
    )
    parser.add_argument("--out", default="retention", help="result file name under bench/results")
    args = parser.parse_args()
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING)
    )  # the worker's info
    sessions = args.sessions or (2 if args.quick else 4)
    calls = args.calls or (120 if args.quick else 300)
    started = time.perf_counter()
    budgets, presets = [int(b) for b in args.budgets.split(",")], args.presets.split(",")
    result = (
        {"sessions": 0, "calls": 0, "tool_token_share": 0.0, "rows": []}
        if args.only_fixtures
        else run(sessions, calls, budgets, presets, peers=not args.no_peers)
    )
    if not args.no_fixtures:
        result["fixtures"] = fixture_cache(budgets, presets)
    result["seconds"] = time.perf_counter() - started
    save(args.out, result)
    print(table(result))
    if "fixtures" in result:
        print()
        print(fixture_table(result["fixtures"]))


if __name__ == "__main__":
    main()
