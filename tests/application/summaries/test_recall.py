"""The recall tool: schemas for both providers, and a handler that expands stubs and searches the log."""

from __future__ import annotations

import json
import re

import contextledger
from contextledger.application.render.renderer import Renderer
from contextledger.projections.policy import Policy

STUBBING = Policy.parse(
    {
        "name": "recall-test",
        "budget": {"total": 2200, "output_reserve": 0, "high_water": 0.9, "low_water": 0.5},
        "retention": {"tools": {"read_file": {"keep_last": 1}}},
        "truncation": {"enabled": False},
        "window": {"keep_first": 0},
    }
)


def _session(ledger) -> str:
    session = ledger.start_session(system_prompt="sys", tools=[{"name": "read_file"}])
    ledger.add_user_message(session, "the task")
    for i in range(6):
        ledger.add_assistant_message(session, f"step {i}", tool_calls=[{"id": f"c{i}", "name": "read_file"}])
        body = f"FILE-{i} " + " ".join(f"t{i}y{j}" for j in range(80))
        if i == 1:
            body += " the secret constant is 4471"
        ledger.add_tool_result(session, f"c{i}", body)
    return session


def test_schemas_have_the_provider_shapes(ledger):
    """The OpenAI shape is a function tool; the Anthropic shape has input_schema; both name the tool."""
    tool = contextledger.recall_tool(ledger, _session(ledger))
    openai, anthropic = tool.schema["openai"], tool.schema["anthropic"]
    assert openai["type"] == "function"
    assert openai["function"]["name"] == "recall"
    assert set(openai["function"]["parameters"]["properties"]) == {
        "query",
        "regex",
        "position",
        "offset",
        "from",
        "through",
    }
    assert anthropic["name"] == "recall"
    assert anthropic["input_schema"] == openai["function"]["parameters"]
    json.dumps(tool.schema)  # plain JSON, ready to send


def test_expand_the_position_a_stub_names(ledger):
    """The seq in a stub's text, handed to the tool, returns that result in full."""
    session = _session(ledger)
    context = Renderer(ledger, tokenizer="heuristic").render(session, STUBBING)
    stubs = [m.text for m in context.messages if m.kind == "stub"]
    assert stubs
    seq = int(re.search(r"restore: seq (\d+)", stubs[0]).group(1))
    [recorded] = ledger.events(session, after=seq - 1, upto=seq)
    answer = contextledger.recall_tool(ledger, session).handle(json.dumps({"position": seq}))
    assert ledger.text(recorded.event.content) in answer
    assert answer.startswith(f"[seq {seq}: tool result of read_file {recorded.event.call_id}")


def test_long_text_is_paged_with_offset(ledger):
    """A text longer than max_chars comes in pages; the footer says which offset reads on."""
    session = _session(ledger)
    tool = contextledger.recall_tool(ledger, session, max_chars=100)
    first = tool.handle({"position": 4})
    assert "call again with offset 100" in first
    second = tool.handle({"position": 4, "offset": 100})
    full = ledger.text(ledger.events(session, after=3, upto=4)[0].event.content)
    assert full[:100] in first
    assert full[100:200] in second


def test_search_finds_evicted_text_by_content(ledger):
    """A query returns the positions and snippets of matches, whatever any render kept."""
    session = _session(ledger)
    answer = contextledger.recall_tool(ledger, session).handle({"query": "SECRET constant"})
    assert "seq 6 (ToolResultRecorded read_file)" in answer
    assert "4471" in answer
    assert "no match" in contextledger.recall_tool(ledger, session).handle({"query": "absent-words"})


def test_bad_calls_get_an_explanation_not_an_exception(ledger):
    """Malformed arguments, a missing field, a bad regex or a position outside the session are explained."""
    tool = contextledger.recall_tool(ledger, _session(ledger))
    assert tool.handle("{not json").startswith("error: the arguments are not JSON")
    assert tool.handle("[1]").startswith("error:")
    assert tool.handle({}).startswith("error: give `position`")
    assert tool.handle({"position": 999}).startswith("error: position 999 is outside")
    assert tool.handle({"position": "3"}).startswith("error:")
    assert tool.handle({"query": "(", "regex": True}).startswith("error: not a regular expression")


def test_search_covers_summaries_and_respects_the_limit(ledger):
    """Summary artifacts are searched too; no more than `limit` hits are listed."""
    session = _session(ledger)
    summary = ledger.record_summary(
        session, covers_from=2, covers_through=5, text="Summary: FILE-0 and FILE-1 read"
    )
    answer = contextledger.recall_tool(ledger, session).handle({"query": "file-1"})
    assert "seq 6 (ToolResultRecorded read_file)" in answer
    assert f"summary {summary.summary_id} (covers seq 2..5)" in answer
    limited = contextledger.recall_tool(ledger, session, limit=2).handle({"query": "file-"})
    assert limited.startswith("2 matches")
