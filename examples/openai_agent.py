"""A tool-using agent on the OpenAI SDK (Chat Completions) with contextledger as its context layer.

    OPENAI_BASE_URL=http://127.0.0.1:8000/v1 OPENAI_API_KEY=x \
        python examples/openai_agent.py --db sqlite:///a.db --budget 8000 --max-turns 30 "task"

Every request is rendered from the ledger within ``--budget`` tokens and audited; every reply, tool
result and token usage is stored. It stops when the model answers without a tool call, or after
``--max-turns`` model calls, and prints the session id.
"""

# ruff: noqa: T201, INP001 - an example script: it prints, and is not part of a package

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import contextledger
import openai

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
    parser.add_argument("--model", default="gpt-4o-mini")
    parser.add_argument("--policy", default="default", help="a contextledger preset")
    args = parser.parse_args(argv)

    client = openai.OpenAI()  # reads OPENAI_BASE_URL and OPENAI_API_KEY
    tools = [{"type": "function", "function": spec} for spec in TOOL_SPECS]  # the OpenAI shape, as is
    with contextledger.open_ledger(args.db) as ledger:
        agent = contextledger.AgentContext.start(
            ledger,
            provider="openai",
            policy=args.policy,
            budget=args.budget,
            system_prompt=SYSTEM_PROMPT,
            tools=tools,
        )
        agent.add_user_message(args.task)
        for _ in range(args.max_turns):
            request = agent.request()  # the messages and tools to send, audited
            started = time.monotonic()
            reply = client.chat.completions.create(model=args.model, **request.arguments)
            latency_ms = (time.monotonic() - started) * 1000
            calls = agent.record_response(request.call_id, reply, latency_ms=latency_ms)
            if not calls:
                print(reply.choices[0].message.content or "")
                break
            for call in calls:
                output, failed = run_tool(call)
                agent.record_tool_result(call.id, output, is_error=failed)
        print(f"session {agent.session_id}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
