"""Hypothesis: sessions with images and files never exceed the budget on any wire, by an independent count."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import contextledger
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
from strict_server import WIRES, StrictServer
from test_strict_content import pdf, png

LONG = os.environ.get("CONTEXTLEDGER_LONG") == "1"
PATHS = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages", "openai-responses": "/v1/responses"}


@st.composite
def media_parts(draw: Any) -> list[dict[str, Any]]:
    """Zero to three parts in the ledger's own shape: images of random sizes and detail, PDFs, URLs."""
    parts: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["image", "image", "url", "file"]))
        if kind == "image":
            size = (draw(st.integers(1, 5000)), draw(st.integers(1, 5000)))
            detail = draw(st.sampled_from([None, "low", "high", "auto"]))
            part = {"kind": "image", "source": "base64", "data": png(*size), "media_type": "image/png"}
            parts.append(part if detail is None else {**part, "detail": detail})
        elif kind == "url":
            parts.append({"kind": "image", "source": "url", "data": "https://example.com/cat.png"})
        else:
            data = pdf(draw(st.integers(1, 3)))
            parts.append({"kind": "file", "source": "base64", "data": data, "media_type": "application/pdf"})
    return parts


@st.composite
def sessions(draw: Any) -> list[dict[str, Any]]:
    """User messages with parts, each possibly followed by a tool call and its result."""
    ops: list[dict[str, Any]] = []
    for n in range(draw(st.integers(1, 8))):
        text = draw(st.text("abc xyz\n", max_size=200))
        parts = draw(media_parts())
        offsets = sorted(draw(st.integers(0, len(text))) for _ in parts)
        media = [{**p, "offset": o} for p, o in zip(parts, offsets, strict=True)]
        ops.append({"role": "user", "content": text, "media": media})
        if draw(st.booleans()):
            call = {"id": f"c{n}", "name": "read", "arguments": "{}"}
            ops.append({"role": "assistant", "content": None, "tool_calls": [call]})
            ops.append({"role": "tool", "call_id": f"c{n}", "content": "out " * draw(st.integers(0, 400))})
    return ops


@settings(
    max_examples=200 if LONG else 25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    ops=sessions(),
    budget=st.integers(6_000, 40_000),
    keep_last=st.none() | st.integers(1, 3),
)
def test_renders_with_media_stay_within_budget_on_every_wire(ops, budget, keep_last):
    """After every message, each wire's request fits the budget by the strict server's own count.

    Images and pages are counted by the providers' documented estimates; every tool call is answered.
    """
    media = {} if keep_last is None else {"keep_last": keep_last}
    policy = contextledger.Policy.parse({"budget": {"total": budget}, "retention": {"media": media}})
    with contextledger.open_ledger("memory://") as ledger:
        session = ledger.start_session(system_prompt="look carefully")
        agents = {p: contextledger.AgentContext(ledger, session, provider=p, policy=policy) for p in PATHS}
        for op in ops:
            ledger.append_many(session, [op])
            if op["role"] == "assistant":
                continue
            for provider, agent in agents.items():
                request = agent.request()
                assert request.tokens <= request.context.budget <= budget
                _, count, check, _ = WIRES[PATHS[provider]]
                server = StrictServer(turns=[], budget=budget)
                assert count(request.arguments) <= budget
                assert check(server, request.arguments) == []
