"""``why`` on a session an ``AgentContext`` drives suggests its settings, not a CLI's (issue 20)."""

from __future__ import annotations

from typing import Any

import contextledger
from contextledger.application.audit.forensics import why
from contextledger.application.render.renderer import Renderer

MARKER = "VAULT-CODE-7Q3X"


def _completion(call_id: str | None, text: str = "") -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if call_id is not None:
        message["tool_calls"] = [
            {"id": call_id, "type": "function", "function": {"name": "run", "arguments": "{}"}}
        ]
    return {
        "model": "m",
        "choices": [{"message": message}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1},
    }


def _drive(ledger: contextledger.Ledger, budget: int) -> str:
    """Ten tool turns of bulky output through AgentContext; the second output holds ``MARKER``."""
    tools = [{"name": "run", "description": "run it", "parameters": {"type": "object", "properties": {}}}]
    agent = contextledger.AgentContext.start(
        ledger, provider="openai", budget=budget, system_prompt="be brief", tools=tools
    )
    agent.add_user_message("find the vault code")
    for turn in range(10):
        request = agent.request()
        for call in agent.record_response(request.call_id, _completion(f"t{turn}")):
            lines = [f"line{turn}-{i}" for i in range(300)]
            if turn == 1:  # the first turn is the pinned head; a cut keeps an output's head and tail
                lines[150] = MARKER
            agent.record_tool_result(call.id, " ".join(lines))
    agent.record_response(agent.request().call_id, _completion(None, "done"))
    return agent.session_id


def test_an_agent_context_session_is_told_the_policy_and_budget_it_set():
    """The fix names ``AgentContext(budget=...)`` and ``ledger.pin``, never a command or a file key."""
    with contextledger.open_ledger("memory://") as ledger:
        session = _drive(ledger, 3000)
        renderer = Renderer(ledger, tokenizer="heuristic")
        answer = why(ledger, session, MARKER, renderer=renderer)
        assert answer.calls_source == "recorded"
        assert answer.first_left_call is not None
        change = answer.smallest_change or ""
        assert "AgentContext(" in change, change
        assert "ledger.pin(" in change
        assert "contextledger pin" not in change
        assert "[budget]" not in change
        assert "[retention" not in change
        assert answer.calls[0].driver == "AgentContext"
        computed = why(ledger, session, MARKER, renderer=renderer, policy=contextledger.Policy(), budget=3000)
        assert computed.calls_source == "computed"
        assert "contextledger pin" in (computed.smallest_change or "")  # computed calls: the CLI's words


def test_a_retention_fix_names_the_policy_field_for_an_agent_and_the_file_key_for_the_cli():
    """The same stub, two drivers: ``retention.tools["bash"].keep_last`` vs ``[retention.tools.bash]``."""
    from contextledger.application.audit.why_answer import CallFate, smallest_change  # noqa: PLC0415

    def fate(driver: str | None) -> CallFate:
        return CallFate(
            call_id="c", position=9, disposition="stubbed", rule="retention:keep_last", driver=driver
        )

    agent = smallest_change([], "s1", 4, "bash", fate("AgentContext"))
    assert agent.startswith(
        'retention.tools["bash"].keep_last = 1 in the Policy given to AgentContext(policy=...)'
    )
    assert "ledger.pin('s1', 4)" in agent
    for driver in (None, "cli"):
        cli = smallest_change([], "s1", 4, "bash", fate(driver))
        assert cli == "[retention.tools.bash] keep_last = 1 or pin it: contextledger pin s1 4"
