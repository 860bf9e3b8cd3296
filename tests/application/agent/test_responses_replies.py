"""Replies of the Responses API stored as the model gave them: a refusal is the model's answer."""

from __future__ import annotations

import json

import contextledger

from tests.application.agent.replies import responses_reply

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
    reply = responses_reply([message])
    agent.record_response(request.call_id, reply)
    agent.add_user_message("Why not?")
    sent = json.dumps(agent.request().arguments["input"])
    assert "I can't help with that." in sent


def test_a_reply_with_several_reasoning_items_sends_each_back_in_order():
    """Reasoning, a web search, reasoning again, a call: each reasoning item goes back before what follows it.

    Only the last reasoning item was kept: the first and its encrypted content were lost from the ledger, and
    the search went back after the other item's reasoning (the API refuses an item without its reasoning).
    """
    ledger = contextledger.open_ledger("memory://")
    agent = contextledger.AgentContext.start(ledger, provider="openai-responses", tools=[RESPONSES_TOOL])
    agent.add_user_message("search, then run")
    request = agent.request()
    output = [
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "ENC1"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search"}},
        {
            "type": "reasoning",
            "id": "rs_2",
            "summary": [{"type": "summary_text", "text": "run it"}],
            "encrypted_content": "ENC2",
        },
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "run",
            "arguments": "{}",
            "status": "completed",
        },
    ]
    reply = responses_reply(output)
    calls = agent.record_response(request.call_id, reply)
    agent.record_tool_result(calls[0].id, "done")
    new = agent.request()
    items = new.arguments["input"]
    assert [i.get("id") for i in items[1:4]] == ["rs_1", "ws_1", "rs_2"]
    assert items[1:4] == output[:3]
    assert items[4]["type"] == "function_call"
    assert contextledger.replay_call(ledger, new.call_id).verified
