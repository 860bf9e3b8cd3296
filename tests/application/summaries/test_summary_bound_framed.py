"""A summary within the policy's ``max_tokens`` is held to it as shown: its header and message counted."""

from __future__ import annotations

import contextledger as cl
from contextledger.projections.summary_requests import SummaryDraft


class _Padded:
    """A model summarizer that uses its whole allowance (the extractive text, padded to the bound)."""

    name = "padded"
    config_sha = "padded-1"

    def __init__(self, renderer: cl.Renderer) -> None:
        self.counter = renderer.counter
        self.extractive = cl.ExtractiveSummarizer(counter=renderer.counter)

    def summarize(self, request):
        text, i = self.extractive.summarize(request).text, 0
        while self.counter.count(text + f"\n- fact {i} about src/f{i}.ts") <= request.max_tokens - 5:
            text += f"\n- fact {i} about src/f{i}.ts"
            i += 1
        return SummaryDraft(text=text)


def test_a_summary_that_uses_its_whole_bound_is_shown_under_blocks():
    """Seed 002's middle of at most 2,000 tokens: drafts of 1,991 text tokens were recorded, never shown.

    The worker held the text to 2,000 tokens; the fold measures the summary as shown (its header and a
    message's overhead) and left every one out, so the middle was dropped with nothing standing for it.
    """
    ledger = cl.open_ledger("memory://")
    sid = ledger.start_session(
        system_prompt="SYS", tools=[{"name": "read_file", "parameters": {"type": "object"}}]
    )
    ledger.add_user_message(sid, "Build a flashcard app with SM-2 in src/sm2.ts")
    renderer = cl.Renderer(ledger, tokenizer="heuristic")
    compactor = cl.Compactor(ledger, renderer, summarizer="padded", summarizer_config="padded-1")
    worker = cl.SummaryWorker(ledger, renderer, _Padded(renderer), worker_id="w1")
    for i in range(120):
        call = {"id": f"c{i}", "name": "read_file", "arguments": {"path": f"src/f{i}.ts"}}
        ledger.add_assistant_message(sid, f"step {i}", tool_calls=[call])
        ledger.add_tool_result(sid, f"c{i}", "\n".join(f"line {j} of f{i}" for j in range(40)))
        renderer.render(sid, "blocks", budget=60_000)  # the compaction points, as an agent's calls reach them
        compactor.plan(sid, "blocks", budget=60_000)
        while worker.run_once():
            pass
    recorded = cl.compaction_turns(ledger, sid)
    assert recorded
    assert all(turn.tokens >= 1_900 for turn in recorded)  # each used most of its bound
    context = renderer.render(sid, "blocks", budget=60_000)
    shown = [m for m in context.messages if m.kind == "summary"]
    assert shown
    assert all(m.tokens <= 2_000 for m in shown)
