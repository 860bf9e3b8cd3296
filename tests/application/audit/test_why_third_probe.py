"""`why` after a third probe of its advice: keep_last's stubs, and the budget a CLI user sets."""

from __future__ import annotations

import contextledger
from contextledger.application.audit.forensics import why
from contextledger.application.render.renderer import Renderer
from contextledger.projections.policy import Policy

FILL = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore "
TOOL = {"type": "function", "function": {"name": "run", "parameters": {"type": "object"}}}


def test_a_result_stubbed_by_keep_last_is_told_to_raise_keep_last():
    """A stub by ``keep_last`` (rule ``retention:count``) was told to change ``keep_steps``: no use."""
    ledger = contextledger.open_ledger("memory://")
    policy = Policy.parse({"base": "default", "retention": {"tools": {"run": {"keep_last": 2}}}})
    agent = contextledger.AgentContext.start(
        ledger, provider="openai", policy=policy, budget=6_000, tools=[TOOL]
    )
    agent.add_user_message("Task: fix it")
    for n in range(12):
        request = agent.request()
        call = {"id": f"call_{n}", "type": "function", "function": {"name": "run", "arguments": "{}"}}
        message = {"role": "assistant", "content": f"step {n}", "tool_calls": [call]}
        reply = {
            "id": f"c{n}",
            "object": "chat.completion",
            "model": "gpt-4o",
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}],
        }
        [issued] = agent.record_response(request.call_id, reply)
        agent.record_tool_result(issued.id, f"OUT-{n}-MARK\n" + FILL * 40)
        if n % 2:
            agent.add_user_message(f"next user turn {n}")
    agent.request()
    answer = why(ledger, agent.session_id, "OUT-5-MARK", renderer=Renderer(ledger))
    assert answer.rule == "retention:count"
    assert 'retention.tools["run"].keep_last = ' in answer.smallest_change
    assert "keep_steps" not in answer.smallest_change


def test_a_text_dropped_to_fit_a_cli_budget_names_that_budget():
    """``why --budget 3000``: the advice was "raise [budget] total", which the default sets to 128,000."""
    ledger = contextledger.open_ledger("memory://")
    sid = ledger.start_session(system_prompt="s")
    ledger.add_user_message(sid, "Task: read everything")
    for n in range(30):
        ledger.add_assistant_message(
            sid, f"reading {n}", tool_calls=[{"id": f"c{n}", "name": "run", "arguments": {}}]
        )
        ledger.add_tool_result(sid, f"c{n}", f"PART-{n}-MARK " + FILL * 8)
    answer = why(ledger, sid, "reading 3", renderer=Renderer(ledger, tokenizer="heuristic"), budget=3_000)
    assert answer.disposition == "dropped", answer.verdict
    assert answer.smallest_change.startswith("raise the prompt budget above 3,000 tokens (--budget"), (
        answer.smallest_change
    )
