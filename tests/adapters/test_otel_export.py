"""OTLP JSON export of model-call records: GenAI spans, a child span per compaction, deterministic ids."""

from __future__ import annotations

import base64
import copy
import json
from datetime import UTC, datetime, timedelta

import jsonschema
from contextledger.adapters.otel import export_otlp, otlp_document, span_id, trace_id
from contextledger.application.audit.call_recorder import CallRecorder
from contextledger.application.kernel.summary_log import SummaryStream
from contextledger.application.render.renderer import Renderer
from contextledger.domain.content import InlineText
from contextledger.domain.events import CompactionRequested, SummaryAttemptFailed, SummaryRecorded
from contextledger.projections.presets import get_preset
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

T0 = datetime(2026, 1, 1, tzinfo=UTC)

_TEXT_OR_NULL = {"anyOf": [{"type": "string"}, {"type": "null"}]}
_PART_DEFS = {
    "TextPart": {"type": "text", "required": ["content"], "props": {"content": {"type": "string"}}},
    "ToolCallRequestPart": {"type": "tool_call", "required": ["name"], "props": {"id": _TEXT_OR_NULL}},
    "ToolCallResponsePart": {
        "type": "tool_call_response",
        "required": ["response"],
        "props": {"id": _TEXT_OR_NULL},
    },
    "ReasoningPart": {"type": "reasoning", "required": ["content"], "props": {"content": {"type": "string"}}},
    "CompactionPart": {
        "type": "compaction",
        "required": [],
        "props": {"id": _TEXT_OR_NULL, "content": _TEXT_OR_NULL},
    },
}
INPUT_MESSAGES_SCHEMA = {
    "$comment": "semantic-conventions-genai gen-ai-input-messages.json: the parts this export writes",
    "type": "array",
    "items": {
        "type": "object",
        "required": ["role", "parts"],
        "properties": {
            "role": {"enum": ["system", "user", "assistant", "tool"]},
            "parts": {
                "type": "array",
                "items": {
                    "oneOf": [
                        {
                            "type": "object",
                            "required": ["type", *d["required"]],
                            "properties": {"type": {"const": d["type"]}, **d["props"]},
                        }
                        for d in _PART_DEFS.values()
                    ]
                },
            },
        },
    },
}


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
    assert attrs["gen_ai.usage.cache_write.input_tokens"] == 20
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


def _compacted(ledger) -> tuple[str, str, str]:
    """A session whose second call is rendered under a budget that stubs or drops old tool output."""
    session = ledger.start_session(system_prompt="sys", model="gpt-4o", tools=[{"name": "read_file"}])
    ledger.add_user_message(session, "task")
    renderer = Renderer(ledger, tokenizer="heuristic")
    recorder = CallRecorder(ledger)
    policy = get_preset("default")
    first = recorder.record(renderer.render(session, policy), policy, call_id="call-a").call_id
    for n in range(12):
        ledger.add_assistant_message(session, f"step {n}", tool_calls=[{"id": f"c{n}", "name": "read_file"}])
        ledger.add_tool_result(session, f"c{n}", f"line {n} " * 400)
    ledger.add_user_message(session, "go on")
    squeezed = renderer.render(session, policy, budget=2_000)
    second = recorder.record(squeezed, policy, call_id="call-b").call_id
    return session, first, second


def test_a_compacted_call_says_so_and_an_untouched_one_does_not(ledger):
    """gen_ai.conversation.compacted is true on a call whose history was cut, else absent (never false)."""
    session, first, second = _compacted(ledger)
    by_id = {s["spanId"]: s for s in _spans(otlp_document(ledger, session)).values()}
    untouched, cut = _attrs(by_id[span_id("call", first)]), _attrs(by_id[span_id("call", second)])
    assert "gen_ai.conversation.compacted" not in untouched
    assert cut["gen_ai.conversation.compacted"] is True
    assert untouched["gen_ai.conversation.id"] == cut["gen_ai.conversation.id"] == session
    root = _attrs(by_id[span_id("session", session)])
    assert root["gen_ai.conversation.id"] == session


def test_a_failed_call_has_an_error_status_and_type(ledger):
    """A call marked failed exports with an error status, its message and a low-cardinality error.type."""
    session, calls = _recorded(ledger)
    CallRecorder(ledger).report_failure(session, calls[1], "RateLimitError: slow down, key sk-abc")
    by_id = {s["spanId"]: s for s in _spans(otlp_document(ledger, session)).values()}
    failed, ok = by_id[span_id("call", calls[1])], by_id[span_id("call", calls[0])]
    assert failed["status"]["code"] == 2
    assert failed["status"]["message"].startswith("RateLimitError")
    assert _attrs(failed)["error.type"] == "RateLimitError"
    assert "status" not in ok
    assert "error.type" not in _attrs(ok)


def test_content_is_off_by_default_and_follows_the_genai_message_schema(ledger):
    """--content adds system instructions and input messages in the GenAI schema; off by default."""
    session, _, second = _compacted(ledger)
    plain = _attrs(
        {s["spanId"]: s for s in _spans(otlp_document(ledger, session)).values()}[span_id("call", second)]
    )
    assert "gen_ai.input.messages" not in plain
    document = otlp_document(ledger, session, content=True)
    attrs = _attrs({s["spanId"]: s for s in _spans(document).values()}[span_id("call", second)])
    messages = json.loads(attrs["gen_ai.input.messages"])
    jsonschema.validate(messages, INPUT_MESSAGES_SCHEMA)
    assert json.loads(attrs["gen_ai.system_instructions"]) == [{"type": "text", "content": "sys"}]
    kinds = [part["type"] for message in messages for part in message["parts"]]
    assert {"text", "tool_call", "tool_call_response"} <= set(kinds)
    assert messages[-1] == {"role": "user", "parts": [{"type": "text", "content": "go on"}]}


def test_a_summary_is_a_compaction_part_carrying_the_summary_id():
    """A summary block becomes the conventions' compaction part carrying the summary's id."""
    from contextledger.adapters.otel_messages import input_messages  # noqa: PLC0415
    from contextledger.projections.context import RenderedContext, RenderedMessage  # noqa: PLC0415

    context = RenderedContext(
        session_id="s",
        position=9,
        policy="default",
        tokenizer="heuristic",
        system="",
        system_tokens=3,
        tools=(),
        tools_tokens=0,
        messages=(
            RenderedMessage(role="user", text="Summary of #2-7: fixed the parser", tokens=9, kind="summary"),
            RenderedMessage(role="user", text="next", tokens=4),
        ),
        stable_prefix=1,
        tokens=16,
        budget=100,
        summary_id="sum-7",
    )
    messages = input_messages(context)
    jsonschema.validate(messages, INPUT_MESSAGES_SCHEMA)
    assert messages[0]["parts"] == [
        {"type": "compaction", "id": "sum-7", "content": "Summary of #2-7: fixed the parser"}
    ]


def _otlp_json_to_proto_json(document: dict) -> dict:
    """OTLP/JSON writes ids as hex; protobuf's JSON mapping wants base64 (a collector converts)."""
    converted = copy.deepcopy(document)
    for resource in converted["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    return converted


def test_the_export_parses_as_a_collector_export_trace_service_request(ledger, tmp_path):
    """The file loads strictly into OTLP's ExportTraceServiceRequest: no unknown field, 16/8-byte ids."""
    session, _, _ = _compacted(ledger)
    CallRecorder(ledger).report_failure(session, "call-b", "Timeout: gone")
    path = tmp_path / "spans.json"
    export_otlp(ledger, session, path, content=True)
    document = json.loads(path.read_text())
    request = json_format.ParseDict(
        _otlp_json_to_proto_json(document), ExportTraceServiceRequest(), ignore_unknown_fields=False
    )
    spans = request.resource_spans[0].scope_spans[0].spans
    assert len(spans) == 3
    assert all(len(s.trace_id) == 16 and len(s.span_id) == 8 for s in spans)
    assert {s.kind for s in spans} <= {1, 3}  # INTERNAL, CLIENT
    failed = next(s for s in spans if s.span_id.hex() == span_id("call", "call-b"))
    assert failed.status.code == 2
    values = {a.key: a.value for a in failed.attributes}
    assert values["gen_ai.conversation.compacted"].bool_value is True
    assert "gen_ai.usage.input_tokens" not in values  # no usage was reported for it
    assert json.loads(values["gen_ai.input.messages"].string_value)[-1]["role"] == "user"
