"""Cache figures of every preset and every peer, in one run, on every transcript session.

Run: .venv/bin/python bench/bench_policies.py [--budgets 16000,32000,64000] [--quick]

Each assistant message of each session is a model call; its prompt is policy(history before it)
and the recorded actions are replayed unchanged. Presets render through contextledger
(``Renderer.render(at=position - 1, budget=B)`` then ``to_openai``); peers (``peers.py``) pick messages
from the same sessions' history, converted to OpenAI messages by this file. Every request, whoever
built it, is counted, pair-checked and priced by ``wire.py``, which imports nothing of contextledger.
Results: bench/results/policies.json and a markdown table per budget.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import contextledger
from contextledger.adapters.importers.service import import_files
from contextledger.domain.content import InlineText, Text

sys.path.insert(0, str(Path(__file__).parent))
from harness import save, transcripts
from peers import Peer, make_peers
from wire import CacheTotals, Request, WireCounter, pairing_problems


@dataclass
class Session:
    """One session as plain OpenAI messages, with the event position of each and the call points."""

    session_id: str
    system: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    positions: list[int]
    calls: list[int]
    task: str | None
    task_position: int
    source: str

    def before(self, position: int) -> list[dict[str, Any]]:
        """Return the messages logged before position ``position``."""
        return [m for m, s in zip(self.messages, self.positions, strict=True) if s < position]


def _tools(event: contextledger.SessionStarted) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                **({"description": t.description} if t.description else {}),
                "parameters": t.parameters or {"type": "object", "properties": {}},
            },
        }
        for t in event.tools
    ]


def _message(event: object, text: Callable[[Text | None], str]) -> dict[str, Any] | None:
    """This bench's own mapping of a logged message event to an OpenAI message (None for others)."""
    if isinstance(event, contextledger.UserMessageAdded):
        return {"role": "user", "content": text(event.content)}
    if isinstance(event, contextledger.ToolResultRecorded):
        return {"role": "tool", "tool_call_id": event.call_id, "content": text(event.content)}
    if not isinstance(event, contextledger.AssistantMessageAdded):
        return None
    if not event.tool_calls:
        return {"role": "assistant", "content": text(event.content)}
    calls = [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for c in event.tool_calls
    ]
    return {"role": "assistant", "content": text(event.content) or None, "tool_calls": calls}


def load_sessions(ledger: contextledger.Ledger) -> list[Session]:
    """Convert every session of the ledger to OpenAI messages, with the positions of its calls."""

    def text(value: Text | None) -> str:
        if value is None:
            return ""
        return value.text if isinstance(value, InlineText) else ledger.text(value)

    sessions = []
    for info in ledger.sessions():
        session = Session(info.session_id, [], [], [], [], [], None, 0, info.source or "?")
        for recorded in ledger.events(info.session_id):
            event = recorded.event
            if isinstance(event, contextledger.SessionStarted):
                session.system = (
                    [{"role": "system", "content": event.system_prompt}] if event.system_prompt else []
                )
                session.tools = _tools(event)
            message = _message(event, text)
            if message is None:
                continue
            if isinstance(event, contextledger.AssistantMessageAdded) and recorded.position >= 2:
                session.calls.append(recorded.position)  # a call needs the session start before it
            if message["role"] == "user" and session.task is None:
                session.task, session.task_position = message["content"], recorded.position
            session.messages.append(message)
            session.positions.append(recorded.position)
        sessions.append(session)
    return sessions


@dataclass
class Tally:
    """Figures of one policy at one budget."""

    cache: CacheTotals = field(default_factory=CacheTotals)
    sessions: int = 0
    over_budget: int = 0
    orphaned_calls: int = 0
    empty: int = 0
    task_not_verbatim: int = 0
    failures: list[dict[str, Any]] = field(default_factory=list)
    done: set[str] = field(default_factory=set)
    internal_under_wire: int = 0
    max_wire_minus_internal: int = 0
    seconds: float = 0.0
    example_problem: str | None = None
    per_session: dict[str, CacheTotals] = field(default_factory=dict)

    def merge(self, session: Session, local: Tally) -> None:
        """Add the figures of one completed session."""
        self.cache.merge(local.cache)
        self.per_session[session.session_id] = local.cache
        for name in ("over_budget", "orphaned_calls", "empty", "task_not_verbatim", "internal_under_wire"):
            setattr(self, name, getattr(self, name) + getattr(local, name))
        self.max_wire_minus_internal = max(self.max_wire_minus_internal, local.max_wire_minus_internal)
        self.example_problem = self.example_problem or local.example_problem
        self.sessions += 1
        self.done.add(session.session_id)

    def account(
        self, session: Session, position: int, messages: list[dict[str, Any]], request: Request, budget: int
    ) -> None:
        """Check and price the request of the call at ``position``."""
        self.cache.add(request)
        self.over_budget += request.size > budget
        problems = pairing_problems(messages)
        if problems:
            self.orphaned_calls += 1
            self.example_problem = self.example_problem or f"{session.session_id}: {problems[0]}"
        self.empty += not any(m["role"] != "system" for m in messages)
        if session.task is not None and session.task_position < position:
            self.task_not_verbatim += not any(
                m["role"] == "user" and m.get("content") == session.task for m in messages
            )


def replay_peer(peer: Peer, sessions: list[Session], counter: WireCounter, budget: int) -> Tally:
    """Run one peer over every call of every session."""
    tally = Tally()
    start = time.perf_counter()
    for session in sessions:
        peer.reset()
        local = Tally()
        tools_tokens = counter.request({"messages": [], "tools": session.tools}).size
        for position in session.calls:
            history = session.before(position)
            messages = peer.prompt(session.system, history, tools_tokens)
            payload = {"messages": messages, **({"tools": session.tools} if session.tools else {})}
            local.account(session, position, messages, counter.request(payload), budget)
        tally.merge(session, local)
    tally.seconds = time.perf_counter() - start
    return tally


def replay_preset(
    renderer: contextledger.Renderer, preset: str, sessions: list[Session], counter: WireCounter, budget: int
) -> Tally:
    """Render a preset before every call of every session and account the emitted payloads."""
    tally = Tally()
    start = time.perf_counter()
    for session in sessions:
        local = Tally()
        try:
            for position in session.calls:
                context = renderer.render(session.session_id, preset, at=position - 1, budget=budget)
                payload = contextledger.to_openai(context)
                request = counter.request(payload)
                local.account(session, position, payload["messages"], request, budget)
                if request.size > context.tokens:
                    local.internal_under_wire += 1
                local.max_wire_minus_internal = max(
                    local.max_wire_minus_internal, request.size - context.tokens
                )
        except Exception as error:  # noqa: BLE001 - a failed render is a figure to report, not to hide
            tally.failures.append(
                {
                    "session": session.session_id,
                    "at": position - 1,
                    "error": f"{type(error).__name__}: {error}",
                }
            )
            continue
        tally.merge(session, local)
    tally.seconds = time.perf_counter() - start
    return tally


def unmanaged_costs(sessions: list[Session], counter: WireCounter) -> dict[str, tuple[float, float]]:
    """Anthropic-like and OpenAI-like cost of sending everything, per session."""
    costs = {}
    for session in sessions:
        totals = CacheTotals()
        for position in session.calls:
            payload = {
                "messages": [*session.system, *session.before(position)],
                **({"tools": session.tools} if session.tools else {}),
            }
            totals.add(counter.request(payload))
        costs[session.session_id] = (totals.cost_anthropic, totals.cost_openai)
    return costs


def by_source(
    tally: Tally, sessions: list[Session], unmanaged: dict[str, tuple[float, float]]
) -> dict[str, dict[str, Any]]:
    """H, C ratio (Anthropic-like) and prefix breaks per transcript source."""
    out: dict[str, dict[str, Any]] = {}
    for source in sorted({s.source for s in sessions}):
        totals = CacheTotals()
        base = 0.0
        for session in sessions:
            if session.source == source and session.session_id in tally.per_session:
                totals.merge(tally.per_session[session.session_id])
                base += unmanaged[session.session_id][0]
        figures = totals.figures()
        out[source] = {
            "sessions": sum(s.source == source and s.session_id in tally.done for s in sessions),
            "calls": figures["calls"],
            "H_anthropic": figures["H_anthropic"],
            "C_ratio_anthropic": figures["C_anthropic"] / base if base else None,
            "prefix_breaks": figures["prefix_breaks"],
            "peak": figures["peak"],
        }
    return out


def row(name: str, tally: Tally, unmanaged: dict[str, tuple[float, float]]) -> dict[str, Any]:
    """JSON figures of one policy, with C relative to unmanaged on the same sessions."""
    base_a = sum(unmanaged[s][0] for s in tally.done) or 1.0
    base_o = sum(unmanaged[s][1] for s in tally.done) or 1.0
    figures = tally.cache.figures()
    return {
        "policy": name,
        "sessions": tally.sessions,
        **figures,
        "C_ratio_anthropic": figures["C_anthropic"] / base_a,
        "C_ratio_openai": figures["C_openai"] / base_o,
        "over_budget": tally.over_budget,
        "orphaned_calls": tally.orphaned_calls,
        "empty_prompts": tally.empty,
        "task_not_verbatim": tally.task_not_verbatim,
        "failed_sessions": len(tally.failures),
        "failures": tally.failures[:20],
        "example_pairing_problem": tally.example_problem,
        "calls_wire_over_internal_count": tally.internal_under_wire,
        "max_wire_minus_internal": tally.max_wire_minus_internal,
        "seconds": round(tally.seconds, 2),
    }


def table(budget: int, rows: list[dict[str, Any]]) -> str:
    """Markdown table of one budget."""
    lines = [
        f"#### Budget {budget:,} tokens",
        "",
        (
            "| policy | sessions | calls | input tokens | peak | over budget | prefix breaks "
            "| H (Anthropic) | C / C(unmanaged) (Anthropic) | H (OpenAI) | C / C(unmanaged) (OpenAI) "
            "| orphaned calls | empty | task not verbatim | failed sessions |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['policy']} | {r['sessions']} | {r['calls']:,} | {r['input_tokens']:,} | {r['peak']:,} "
        f"| {r['over_budget']} | {r['prefix_breaks']} | {r['H_anthropic']:.3f} "
        f"| {r['C_ratio_anthropic']:.3f} | {r['H_openai']:.3f} | {r['C_ratio_openai']:.3f} "
        f"| {r['orphaned_calls']} | {r['empty_prompts']} | {r['task_not_verbatim']} "
        f"| {r['failed_sessions']} |"
        for r in rows
    ]
    return "\n".join(lines)


def source_table(rows: list[dict[str, Any]]) -> str:
    """Markdown table: per transcript source, H / C ratio (Anthropic-like) / prefix breaks."""
    sources = list(rows[0]["by_source"])
    calls = [rows[0]["by_source"][s]["calls"] for s in sources]
    header = " | ".join(f"{s} ({c} calls)" for s, c in zip(sources, calls, strict=True))
    lines = [
        "H / C ratio / prefix breaks (Anthropic-like) by source",
        "",
        f"| policy | {header} |",
        "|---" * (len(sources) + 1) + "|",
    ]
    for r in rows:
        cells = []
        for source in sources:
            f = r["by_source"][source]
            ratio = "-" if f["C_ratio_anthropic"] is None else f"{f['C_ratio_anthropic']:.2f}"
            cells.append(f"{f['H_anthropic']:.3f} / {ratio} / {f['prefix_breaks']}")
        lines.append(f"| {r['policy']} | {' | '.join(cells)} |")
    return "\n".join(lines)


def main() -> None:
    """Replay every preset and peer at each budget; write bench/results/policies.json."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--budgets", default="16000,32000,64000", help="comma-separated prompt budgets")
    parser.add_argument("--quick", action="store_true", help="the 32k budget only")
    parser.add_argument("--presets", default=",".join(contextledger.preset_names()))
    parser.add_argument("--out", default="policies", help="result file name under bench/results")
    args = parser.parse_args()
    budgets = [32_000] if args.quick else [int(b) for b in args.budgets.split(",")]
    presets = [p for p in args.presets.split(",") if p]
    files = [str(p) for p in transcripts()]
    started = time.perf_counter()
    counter = WireCounter()
    with contextledger.open_ledger("memory://") as ledger:
        import_files(ledger, files)
        sessions = load_sessions(ledger)
        unmanaged = unmanaged_costs(sessions, counter)
        out: dict[str, Any] = {
            "files": [Path(f).name for f in files],
            "sessions": len(sessions),
            "calls": sum(len(s.calls) for s in sessions),
            "budgets": {},
        }
        for budget in budgets:
            renderer = contextledger.Renderer(ledger)
            tallies = [(p, replay_preset(renderer, p, sessions, counter, budget)) for p in presets]
            tallies += [
                (peer.name, replay_peer(peer, sessions, counter, budget))
                for peer in make_peers(counter, budget)
            ]
            rows = [
                row(name, t, unmanaged) | {"by_source": by_source(t, sessions, unmanaged)}
                for name, t in tallies
            ]
            out["budgets"][str(budget)] = rows
            print(table(budget, rows), flush=True)
            print()
            print(source_table(rows), flush=True)
            print()
            for r in rows:
                for failure in r["failures"]:
                    print(f"RENDER FAILED {r['policy']} @{budget}: {failure}")
    out["seconds"] = round(time.perf_counter() - started, 1)
    print(f"{out['sessions']} sessions, {out['calls']} calls, {len(files)} files; {out['seconds']} s")
    print(f"results: {save(args.out, out)}")


if __name__ == "__main__":
    main()
