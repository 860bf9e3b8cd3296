"""Anthropic server tool blocks (web search, code execution, MCP) in imported replies are kept exactly."""

from __future__ import annotations

import json

from contextledger import AssistantMessageAdded
from contextledger.adapters.importers.service import import_file
from contextledger.application.kernel.wire_shapes import HOSTED_ITEMS

SEARCH = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "X"}}
FOUND = [{"type": "web_search_result", "url": "https://a.example", "title": "A", "encrypted_content": "e1"}]
FAILED = {"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"}
MCP = {"type": "mcp_tool_use", "id": "mcptoolu_1", "name": "lookup", "server_name": "docs", "input": {}}


def _transcript(result: object) -> dict:
    hosted = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": result}
    reply = [SEARCH, hosted, MCP, {"type": "text", "text": "X is Y."}]
    return {
        "model": "c",
        "messages": [{"role": "user", "content": "Search for X"}, {"role": "assistant", "content": reply}],
    }


IMPORTED_BEFORE = "anthropic-7cfb7751155406b6"
"""The session id the importer gave ``_transcript(FOUND)`` when it dropped the blocks (at ``57402ad``)."""


def test_server_tool_blocks_are_kept_in_order_as_the_api_gave_them(tmp_path, ledger):
    """They were dropped with a note: a resumed session could not send its search back, nor show it."""
    path = tmp_path / "a.json"
    path.write_text(json.dumps(_transcript(FOUND)))
    done = import_file(ledger, path, "anthropic")
    assert done.error is None, done.error
    (reply,) = [
        r.event
        for r in ledger.events(done.sessions[0].session_id)
        if isinstance(r.event, AssistantMessageAdded)
    ]
    hosted = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": FOUND}
    assert reply.meta[HOSTED_ITEMS] == [SEARCH, hosted, MCP]
    assert ledger.text(reply.content) == "X is Y."
    assert not any("dropped" in n for n in done.sessions[0].notes)
    assert done.sessions[0].session_id == IMPORTED_BEFORE


def test_a_search_that_failed_does_not_refuse_the_file(tmp_path, ledger):
    """A web search result holding its error object refused the whole file ("Expected `str | array`")."""
    path = tmp_path / "a.json"
    path.write_text(json.dumps(_transcript(FAILED)))
    done = import_file(ledger, path, "anthropic")
    assert done.error is None, done.error
    (reply,) = [
        r.event
        for r in ledger.events(done.sessions[0].session_id)
        if isinstance(r.event, AssistantMessageAdded)
    ]
    assert reply.meta[HOSTED_ITEMS][1]["content"] == FAILED
