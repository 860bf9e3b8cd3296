"""Replies of the Responses API stored as the model gave them: a refusal is the model's answer."""

from __future__ import annotations

import json

import contextledger

RESPONSES_TOOL = {"type": "function", "name": "run", "parameters": {"type": "object"}}


def test_a_responses_refusal_is_kept_as_the_reply():
    """A ``refusal`` part is the model's answer: stored as the reply's text and sent back with it.

    Only ``text`` was read, so the refusal was stored as an empty reply and the next request told the model
    it had said nothing.
    """
    ledger = contextledger.open_ledger("memory://")
    agent = contextledger.AgentContext.start(ledger, provider="openai-responses", tools=[RESPONSES_TOOL])
    agent.add_user_message("Do the forbidden thing")
    request = agent.request()
    refusal = {"type": "refusal", "refusal": "I can't help with that."}
    message = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [refusal],
    }
    reply = {
        "id": "resp_1",
        "object": "response",
        "model": "o4-mini",
        "status": "completed",
        "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
        "output": [message],
    }
    agent.record_response(request.call_id, reply)
    agent.add_user_message("Why not?")
    sent = json.dumps(agent.request().arguments["input"])
    assert "I can't help with that." in sent
