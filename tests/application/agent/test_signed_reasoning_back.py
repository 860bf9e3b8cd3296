"""Signed reasoning goes back with its tool-use turn: a cut message, an empty text, an imported session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import contextledger
from contextledger.adapters.providers.agent import provider_format
from contextledger.application.agent.signed_reasoning import signed_reasoning
from contextledger.application.kernel.wire_shapes import THINKING_BLOCKS
from contextledger.domain.events import AssistantMessageAdded
from contextledger.projections.reasoning_back import RULES_KEY
from contextledger.testing import check_anthropic_pairing

from tests.application.agent.replies import messages_reply, responses_reply

TOOL = {"name": "run", "input_schema": {"type": "object"}}
RESPONSES_TOOL = {"type": "function", "name": "run", "parameters": {"type": "object"}}
CLAUDE_CODE = (
    Path(__file__).resolve().parents[2]
    / "fixtures"
    / "transcripts"
    / "claude-code__132b2f66-ee5f-46f6-8904-32d9dc4d36c3.jsonl"
)


def _last_assistant(payload: dict[str, Any]) -> list[str]:
    return [b["type"] for b in [m for m in payload["messages"] if m["role"] == "assistant"][-1]["content"]]


def test_a_turn_whose_assistant_message_is_cut_still_leads_with_its_thinking() -> None:
    """A reply longer than the per-message cap is cut at a compaction point; its thinking block stays.

    Only whole messages got their reasoning back, so the cut one lost its thinking block: with extended
    thinking on, Anthropic refuses a tool-use turn whose assistant message does not begin with it.
    """
    ledger = contextledger.open_ledger("memory://")
    agent = contextledger.AgentContext.start(ledger, provider="anthropic", budget=8_000, tools=[TOOL])
    agent.add_user_message("Task: investigate")
    cut = 0
    for turn in range(5):
        request = agent.request()
        kinds = [m.kind for m in request.context.messages if m.role == "assistant"]
        if kinds:
            assert _last_assistant(request.arguments)[0] == "thinking", kinds[-1]
            cut += kinds[-1] == "truncated"
            assert not check_anthropic_pairing(request.arguments)
        blocks = [
            {"type": "thinking", "thinking": f"plan {turn}", "signature": f"SIG{turn}"},
            {"type": "text", "text": "blah " * 2_500},
            {"type": "tool_use", "id": f"toolu_{turn}", "name": "run", "input": {}},
        ]
        calls = agent.record_response(request.call_id, messages_reply(turn, blocks))
        agent.record_tool_result(calls[0].id, "out\n" * 150)
    assert cut, "the budget cuts the turn's assistant message at least once"


def test_signed_reasoning_with_no_text_goes_back() -> None:
    """An encrypted reasoning item with no summary and a thinking block with no text are sent back.

    No summary is the Responses default; both were stored and never sent, as they had no text.
    """
    ledger = contextledger.open_ledger("memory://")
    responses = contextledger.AgentContext.start(ledger, provider="openai-responses", tools=[RESPONSES_TOOL])
    responses.add_user_message("Task")
    request = responses.request()
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAAB-opaque"}
    call = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "run", "arguments": "{}"}
    reply = responses_reply([reasoning, {**call, "status": "completed"}])
    calls = responses.record_response(request.call_id, reply)
    responses.record_tool_result(calls[0].id, "out")
    items = responses.request().arguments["input"]
    sent = [i for i in items if i.get("type") == "reasoning"]
    assert sent == [reasoning]
    assert [i.get("type", i.get("role")) for i in items] == [
        "user",
        "reasoning",
        "function_call",
        "function_call_output",
    ]
    anthropic = contextledger.AgentContext.start(ledger, provider="anthropic", tools=[TOOL])
    anthropic.add_user_message("Task")
    request = anthropic.request()
    thinking = {"type": "thinking", "thinking": "", "signature": "SIG"}
    blocks = [thinking, {"type": "tool_use", "id": "toolu_1", "name": "run", "input": {}}]
    calls = anthropic.record_response(request.call_id, messages_reply(0, blocks))
    anthropic.record_tool_result(calls[0].id, "out")
    payload = anthropic.request().arguments
    assert [m for m in payload["messages"] if m["role"] == "assistant"][-1]["content"][0] == thinking


def _midturn(tmp_path: Path) -> Path:
    """The Claude Code fixture cut just after the first tool results of a turn led by signed thinking."""
    lines = CLAUDE_CODE.read_text(encoding="utf-8").splitlines(keepends=True)[:7]
    path = tmp_path / "midturn.jsonl"
    path.write_text("".join(lines), encoding="utf-8")
    return path


def test_an_imported_session_resumed_mid_turn_sends_its_thinking_back(tmp_path: Path) -> None:
    """A Claude Code transcript keeps each signed thinking block exactly; the resumed loop sends it first.

    The importer kept the signatures under a key the loop never read, so the resumed request's turn had
    no thinking block.
    """
    ledger = contextledger.open_ledger("memory://")
    source = _midturn(tmp_path)
    raw = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
    logged = [
        block
        for record in raw
        if record.get("type") == "assistant"
        for block in record["message"]["content"]
        if block.get("type") == "thinking"
    ]
    assert logged
    assert all(b.get("signature") for b in logged)
    assert contextledger.import_file(ledger, source).ok
    [info] = ledger.sessions()
    stored = [r.event for r in ledger.events(info.session_id) if isinstance(r.event, AssistantMessageAdded)]
    kept = stored[-1].meta[THINKING_BLOCKS]
    assert [(b["thinking"], b["signature"]) for b in kept] == [
        (b["thinking"], b["signature"]) for b in logged
    ]
    payload = contextledger.AgentContext(ledger, info.session_id, provider="anthropic").request().arguments
    first = [m for m in payload["messages"] if m["role"] == "assistant"][-1]["content"][0]
    assert first == {
        "type": "thinking",
        "thinking": logged[0]["thinking"],
        "signature": logged[0]["signature"],
    }
    again = contextledger.import_file(ledger, source)
    assert [s.status for s in again.sessions] == ["unchanged"]


def test_a_call_recorded_under_the_earlier_rules_still_replays_byte_for_byte() -> None:
    """A record without ``reasoning_rules`` was built under rules 1 and is rebuilt under them; a new one, 2.

    A thinking block with no text went back only under rules 2: rebuilt under 2, the earlier payload would
    no longer hash as recorded (``ReplayMismatchError``), and its audit could not be verified.
    """
    ledger = contextledger.open_ledger("memory://")
    agent = contextledger.AgentContext.start(ledger, provider="anthropic", tools=[TOOL])
    agent.add_user_message("Task")
    request = agent.request()
    thinking = {"type": "thinking", "thinking": "", "signature": "SIG"}
    blocks = [thinking, {"type": "tool_use", "id": "toolu_1", "name": "run", "input": {}}]
    calls = agent.record_response(request.call_id, messages_reply(0, blocks))
    agent.record_tool_result(calls[0].id, "out")
    new = agent.request()
    assert new.arguments["messages"][1]["content"][0] == thinking
    assert contextledger.replay_call(ledger, new.call_id).verified
    provider = provider_format("anthropic")
    earlier = provider.payload(new.context, signed_reasoning(ledger, agent.session_id, new.context, rules=1))
    assert earlier.arguments["messages"][1]["content"][0]["type"] == "tool_use"  # no thinking under rules 1
    old = agent.recorder.record(new.context, agent.policy, payload=earlier.arguments, wire_format="anthropic")
    assert RULES_KEY not in old.meta
    assert contextledger.replay_call(ledger, old.call_id).verified


def test_a_transcript_imported_before_the_blocks_were_kept_is_unchanged_on_import_again() -> None:
    """The digest naming a session reads kept thinking blocks as the signatures kept before (ADR 0088).

    Otherwise importing a Claude Code transcript again after the change would store a second session.
    """
    from contextledger.adapters.importers.base import _as_digested  # noqa: PLC0415 - the digest's one rule

    blocks = [
        {"type": "thinking", "thinking": "a", "signature": "S1"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "thinking", "thinking": "b", "signature": "S2"},
    ]
    now = {"role": "assistant", "reasoning": "a\n\nb", "meta": {"uuid": "u1", THINKING_BLOCKS: blocks}}
    before = {
        "role": "assistant",
        "reasoning": "a\n\nb",
        "meta": {"uuid": "u1", "thinking_signatures": ["S1", "S2"]},
    }
    assert _as_digested(now) == before
    plain = {"role": "assistant", "content": "hi", "meta": {"uuid": "u2"}}
    assert _as_digested(plain) is plain


def test_a_responses_call_with_hosted_items_recorded_under_the_earlier_rules_still_verifies() -> None:
    """A reasoning item with no summary, beside a hosted tool's item, went back under rules 1 too.

    It was read for its hosted items and sent with one empty summary part; rules 2 send an empty list.
    Rebuilt with rules 2's list, that earlier payload no longer hashed as recorded.
    """
    ledger = contextledger.open_ledger("memory://")
    agent = contextledger.AgentContext.start(ledger, provider="openai-responses", tools=[RESPONSES_TOOL])
    agent.add_user_message("Task")
    request = agent.request()
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAAB-opaque"}
    search = {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search"}}
    call = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "run", "arguments": "{}"}
    reply = responses_reply([reasoning, search, {**call, "status": "completed"}])
    calls = agent.record_response(request.call_id, reply)
    agent.record_tool_result(calls[0].id, "out")
    new = agent.request()
    assert [i for i in new.arguments["input"] if i.get("type") == "reasoning"] == [reasoning]
    earlier = dict(reasoning, summary=[{"type": "summary_text", "text": ""}])  # what rules 1 sent
    payload = json.loads(json.dumps(new.arguments))
    payload["input"] = [earlier if i.get("type") == "reasoning" else i for i in payload["input"]]
    old = agent.recorder.record(new.context, agent.policy, payload=payload, wire_format="openai-responses")
    assert RULES_KEY not in old.meta
    assert contextledger.replay_call(ledger, old.call_id).verified
    assert contextledger.replay_call(ledger, new.call_id).verified
