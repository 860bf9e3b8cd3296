"""OTLP JSON export of model-call records: GenAI spans, a child span per compaction, deterministic ids."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from contextledger.adapters.otel import export_otlp, otlp_document, span_id, trace_id
from contextledger.application.audit.call_recorder import CallRecorder
from contextledger.application.kernel.summary_log import SummaryStream
from contextledger.application.render.renderer import Renderer
from contextledger.domain.content import InlineText
from contextledger.domain.events import CompactionRequested, SummaryAttemptFailed, SummaryRecorded
from contextledger.projections.presets import get_preset

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _recorded(ledger) -> tuple[str, list[str]]:
    """A session with two recorded calls (usage on the first) and two compactions (one done, one failed)."""
    session = ledger.start_session(system_prompt="sys", model="gpt-4o", tools=[{"name": "read_file"}])
    ledger.add_user_message(session, "task")
    renderer = Renderer(ledger, tokenizer="heuristic")
    recorder = CallRecorder(ledger)
    policy = get_preset("default")
    first = recorder.record(renderer.render(session, policy), policy, call_id="call-a")
    recorder.report_usage(
        session,
        "call-a",
        input_tokens=120,
        cached_tokens=100,
        cache_write_tokens=20,
        output_tokens=7,
        latency_ms=350.0,
        model="gpt-4o-2024-08-06",
    )
    ledger.add_assistant_message(session, "look", tool_calls=[{"id": "c1", "name": "read_file"}])
    ledger.add_tool_result(session, "c1", "body")
    stream = SummaryStream(ledger.log, session)
    for request_id, planned in (("req-1", 3), ("req-2", 4)):
        stream.append(
            CompactionRequested(
                request_id=request_id,
                session_id=session,
                covers_from=2,
                covers_through=3,
                planned_at=planned,
                round=1,
                policy="default",
                tokens_before=500,
                target_tokens=200,
                at=T0 + timedelta(seconds=planned),
            )
        )
    stream.append(
        SummaryRecorded(
            summary_id="sum-1",
            session_id=session,
            covers_from=2,
            covers_through=3,
            content=InlineText("s"),
            produced_at=4,
            request_id="req-1",
            at=T0 + timedelta(seconds=5),
        )
    )
    stream.append(
        SummaryAttemptFailed(
            request_id="req-2",
            attempt=1,
            worker="w",
            error_type="Timeout",
            message="slow",
            dead_lettered=True,
            at=T0 + timedelta(seconds=9),
        )
    )
    second = recorder.record(renderer.render(session, policy), policy, call_id="call-b")
    return session, [first.call_id, second.call_id]


def _spans(document) -> dict[str, dict]:
    [resource] = document["resourceSpans"]
    [scope] = resource["scopeSpans"]
    return {s["name"] + ":" + s["spanId"]: s for s in scope["spans"]}


def _attrs(span) -> dict[str, object]:
    out = {}
    for item in span["attributes"]:
        [(kind, value)] = item["value"].items()
        out[item["key"]] = int(value) if kind == "intValue" else value
    return out


def test_file_parses_with_genai_call_spans(ledger, tmp_path):
    """The file is OTLP JSON; each call is a chat span with gen_ai usage and contextledger attributes."""
    session, calls = _recorded(ledger)
    path = tmp_path / "out.json"
    assert export_otlp(ledger, session, path) == 1 + 2 + 2
    document = json.loads(path.read_text())
    spans = list(_spans(document).values())
    by_id = {s["spanId"]: s for s in spans}
    call = by_id[span_id("call", "call-a")]
    attrs = _attrs(call)
    assert call["name"] == "chat gpt-4o"
    assert call["kind"] == 3
    assert call["traceId"] == trace_id(session)
    assert call["parentSpanId"] == span_id("session", session)
    assert int(call["endTimeUnixNano"]) - int(call["startTimeUnixNano"]) == 350_000_000
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.system"] == "openai"
    assert attrs["gen_ai.request.model"] == "gpt-4o"
    assert attrs["gen_ai.response.model"] == "gpt-4o-2024-08-06"
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (120, 7)
    assert attrs["gen_ai.usage.cache_read.input_tokens"] == 100
    assert attrs["gen_ai.usage.cache_creation.input_tokens"] == 20
    assert attrs["contextledger.policy"] == "default"
    assert attrs["contextledger.position"] == 2
    tiers = [
        attrs[f"contextledger.tiers.{t}"]
        for t in ("system", "tools", "summary", "history", "tool_results", "injected")
    ]
    assert sum(tiers) == attrs["contextledger.rendered_tokens"]
    assert attrs["contextledger.dispositions"] == "pinned 2"  # the system prompt and the task
    assert attrs["contextledger.dispositions.pinned"] == 2
    second = _attrs(by_id[span_id("call", calls[1])])
    assert "gen_ai.usage.input_tokens" not in second  # no usage reported: no invented figures
    assert all(len(s["traceId"]) == 32 and len(s["spanId"]) == 16 for s in spans)


def test_a_child_span_per_compaction(ledger):
    """Each compaction is a span under the call that followed it, ending at its summary or its failure."""
    session, calls = _recorded(ledger)
    by_id = {s["spanId"]: s for s in _spans(otlp_document(ledger, session)).values()}
    done = by_id[span_id("compaction", "req-1")]
    failed = by_id[span_id("compaction", "req-2")]
    assert done["parentSpanId"] == failed["parentSpanId"] == span_id("call", calls[1])
    assert done["status"] == {"code": 1}
    assert failed["status"]["code"] == 2
    assert "Timeout" in failed["status"]["message"]
    assert int(done["endTimeUnixNano"]) - int(done["startTimeUnixNano"]) == 2_000_000_000
    attrs = _attrs(done)
    assert attrs["contextledger.compaction.summary_id"] == "sum-1"
    assert (
        attrs["contextledger.compaction.covers_from"],
        attrs["contextledger.compaction.covers_through"],
    ) == (2, 3)


def test_export_is_deterministic(ledger, tmp_path):
    """Two exports of the same log are byte-identical; ids derive from the session and call ids."""
    session, _ = _recorded(ledger)
    export_otlp(ledger, session, tmp_path / "a.json")
    export_otlp(ledger, session, tmp_path / "b.json")
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    assert span_id("call", "call-a") == span_id("call", "call-a") != span_id("call", "call-b")
