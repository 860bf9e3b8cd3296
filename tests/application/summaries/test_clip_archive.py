"""Clip-archive (seed 003): batches with depth, first and last shown, the middle folded and searchable."""

from __future__ import annotations

import contextledger
from contextledger.adapters.summarizers.extractive import ExtractiveSummarizer
from contextledger.application.kernel.summary_log import SummaryStream
from contextledger.application.render.renderer import Renderer
from contextledger.application.search.log_search import search_session
from contextledger.application.summaries.clip_archive import BUFFER, visible_batches
from contextledger.application.summaries.compaction import Compactor
from contextledger.application.summaries.summary_worker import SummaryWorker
from contextledger.projections.presets import PRESETS

POLICY = PRESETS["clip-archive"]
BUDGET = 5_000


def _turn(ledger, session, i) -> None:
    ledger.add_user_message(session, f"Step {i}: inspect component_{i} and report its checksum CHK{i:05d}.")
    ledger.add_assistant_message(
        session,
        f"I'll open src/part_{i}.py.",
        tool_calls=[{"id": f"c{i}", "name": "read_file", "arguments": {"path": f"src/part_{i}.py"}}],
    )
    ledger.add_tool_result(session, f"c{i}", f"# part {i}\n" + "x = 1\n" * 150)


def test_batches_accumulate_then_the_middle_folds_one_level_deeper():
    """Depth-0 batches until the window plus buffer is exceeded, then one depth-1 batch for the middle."""
    ledger = contextledger.open_ledger("memory://")
    session = ledger.start_session(
        system_prompt="agent", tools=[{"name": "read_file", "parameters": {"type": "object"}}]
    )
    renderer = Renderer(ledger, tokenizer="heuristic")
    summarizer = ExtractiveSummarizer(counter=renderer.counter)
    compactor = Compactor(
        ledger, renderer, summarizer=summarizer.name, summarizer_config=summarizer.config_sha
    )
    worker = SummaryWorker(ledger, renderer, summarizer, worker_id="w")
    contexts = []
    for i in range(160):
        _turn(ledger, session, i)
        contexts.append(renderer.render(session, POLICY, budget=BUDGET))
        compactor.plan(session, POLICY, budget=BUDGET)
        worker.run_once()
    artifacts = SummaryStream(ledger.log, session).artifacts()
    depths = {a.depth for a in artifacts}
    assert 0 in depths
    assert 1 in depths, "the middle batches were never re-summarized"
    deep = next(a for a in artifacts if a.depth == 1)
    inside = [
        a
        for a in artifacts
        if a.depth == 0 and deep.covers_from <= a.covers_from and a.covers_through <= deep.covers_through
    ]
    assert len(inside) >= 2  # it folds several batches
    visible = visible_batches(artifacts)
    assert len(visible) <= POLICY.summary.clip_first + POLICY.summary.clip_last + BUFFER + 1
    assert all(c.tokens <= c.budget for c in contexts)
    last = contexts[-1]
    shown = [m for m in last.messages if m.kind == "summary"]
    assert 1 <= len(shown) <= POLICY.summary.clip_first + POLICY.summary.clip_last
    early = "CHK00003"
    assert not any(early in m.text for m in last.messages if m.kind != "summary") or early in "".join(
        m.text for m in shown
    )
    hits = search_session(ledger, session, early)
    assert hits  # the omitted middle is still searchable
    assert hits[0].position < deep.covers_through


def test_every_omitted_span_has_a_recallable_marker():
    """Every position no message shows is in a span the card lists, and `recall` resolves each span's handle.

    Run with clip-archive (the middle batches are not shown at all) and every other preset, with the
    extractive worker between calls: recoverable retention is 100 % by construction.
    """
    import json  # noqa: PLC0415
    import re  # noqa: PLC0415

    handle = re.compile(r"^- (\d+)-(\d+): .*recall (\{\"from\": \d+, \"through\": \d+\})$", re.MULTILINE)
    for name, policy in PRESETS.items():
        ledger = contextledger.open_ledger("memory://")
        session = ledger.start_session(
            system_prompt="agent", tools=[{"name": "read_file", "parameters": {"type": "object"}}]
        )
        renderer = Renderer(ledger, tokenizer="heuristic")
        summarizer = ExtractiveSummarizer(counter=renderer.counter)
        compactor = Compactor(
            ledger, renderer, summarizer=summarizer.name, summarizer_config=summarizer.config_sha
        )
        worker = SummaryWorker(ledger, renderer, summarizer, worker_id="w")
        recall = contextledger.recall_tool(ledger, session)
        checked = 0
        for i in range(70):
            _turn(ledger, session, i)
            context = renderer.render(session, policy, budget=BUDGET)
            compactor.plan(session, policy, budget=BUDGET)
            worker.run_once()
            shown = {p for m in context.messages if m.kind != "card" for p in m.sources}
            summarized = {
                p
                for m in context.messages
                if m.kind == "summary"
                for p in range(m.sources[0], m.sources[1] + 1)
            }
            cards = [m.text for m in context.messages if m.kind == "card"]
            spans = [(int(a), int(b), h) for a, b, h in handle.findall(cards[0])] if cards else []
            marked = {p for a, b, _ in spans for p in range(a, b + 1)}
            missing = set(range(2, context.position + 1)) - shown - summarized - marked
            assert not missing, (
                f"{name}: positions {sorted(missing)[:5]} have no marker at {context.position}"
            )
            for first, last, args in spans[-2:]:
                answer = recall.handle(args)
                assert answer.startswith(f"[seq {first}..{last}:"), answer[:80]
                assert f"- seq {first} (" in answer
                assert json.loads(args) == {"from": first, "through": last}
                checked += 1
        assert checked, f"{name}: nothing was ever omitted"
