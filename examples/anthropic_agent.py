"""A tool-using agent on the Anthropic SDK (Messages) with contextledger as its context layer.

    ANTHROPIC_BASE_URL=http://127.0.0.1:8000 ANTHROPIC_API_KEY=x \
        python examples/anthropic_agent.py --db sqlite:///a.db --budget 8000 --max-turns 30 "task"

Every request is rendered from the ledger within ``--budget`` tokens (cache breakpoints included)
and audited; every reply (signed thinking too, sent back while its tool-use turn lasts), tool result
and token usage is stored. It stops when the model answers without a tool call, or after
``--max-turns`` model calls, and prints the session id.
"""

# ruff: noqa: T201, INP001 - an example script: it prints, and is not part of a package

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import anthropic
import contextledger

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tools import SYSTEM_PROMPT, TOOL_SPECS, run_tool  # the example's own helper module


def main(argv: list[str] | None = None) -> int:
    """Run the agent on the task; return the exit code."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("task", help="what the agent should do")
    parser.add_argument(
        "--db", default="sqlite:///agent.db", help="ledger URL (sqlite:///..., postgresql://...)"
    )
    parser.add_argument("--budget", type=int, default=8000, help="tokens a request may hold")
    parser.add_argument("--max-turns", type=int, default=30, help="most model calls")
    parser.add_argument("--model", default="claude-sonnet-4-5")
    parser.add_argument("--max-tokens", type=int, default=4096, help="most tokens of one reply")
    parser.add_argument("--thinking", type=int, default=0, help="extended thinking budget (0: off)")
    parser.add_argument("--policy", default="default", help="a contextledger preset")
    args = parser.parse_args(argv)

    client = anthropic.Anthropic()  # reads ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY
    tools = [  # the Anthropic shape, as is
        {"name": s["name"], "description": s["description"], "input_schema": s["parameters"]}
        for s in TOOL_SPECS
    ]
    options: dict[str, Any] = {"model": args.model, "max_tokens": args.max_tokens}
    if args.thinking:
        options["thinking"] = {"type": "enabled", "budget_tokens": args.thinking}
    with contextledger.open_ledger(args.db) as ledger:
        agent = contextledger.AgentContext.start(
            ledger,
            provider="anthropic",
            policy=args.policy,
            budget=args.budget,
            system_prompt=SYSTEM_PROMPT,
            tools=tools,
        )
        agent.add_user_message(args.task)
        for _ in range(args.max_turns):
            request = agent.request()  # system, messages and tools to send, audited
            started = time.monotonic()
            reply = client.messages.create(**options, **request.arguments)
            latency_ms = (time.monotonic() - started) * 1000
            calls = agent.record_response(request.call_id, reply, latency_ms=latency_ms)
            if not calls:
                print("".join(block.text for block in reply.content if block.type == "text"))
                break
            for call in calls:
                output, failed = run_tool(call)
                agent.record_tool_result(call.id, output, is_error=failed)
        print(f"session {agent.session_id}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
