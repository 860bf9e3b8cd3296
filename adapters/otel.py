"""Export model-call records as OpenTelemetry GenAI spans in the OTLP/HTTP JSON encoding (no collector).

Attribute names follow the GenAI conventions of open-telemetry/semantic-conventions-genai (``gen_ai.*``,
``gen_ai.conversation.compacted``, the ``compaction`` message part); ``contextledger.*`` attributes and
the compaction span are this project's documented extension (docs/otel.md).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from contextledger.adapters.otel_messages import input_messages, system_instructions
from contextledger.adapters.whole_file import write_whole
from contextledger.application.audit.call_recorder import CallRecorder, CallView
from contextledger.application.kernel.ledger import Ledger
from contextledger.application.kernel.summary_log import SummaryStream
from contextledger.application.render.renderer import Renderer
from contextledger.domain.events import (
    CompactionRequested,
    SessionStarted,
    SummaryAttemptFailed,
    SummaryAttemptStarted,
    SummaryRecorded,
)
from contextledger.projections.context import RenderedContext

__all__ = ["COMPACTING", "error_type", "export_otlp", "otlp_document", "span_id", "trace_id"]

SCOPE = "contextledger"
_CLIENT = 3  # SPAN_KIND_CLIENT
_INTERNAL = 1  # SPAN_KIND_INTERNAL
_OK, _ERROR = 1, 2  # STATUS_CODE_OK, STATUS_CODE_ERROR
COMPACTING = frozenset({"summarized", "dropped", "stubbed", "truncated"})
"""Dispositions that mean the history sent was compacted (``gen_ai.conversation.compacted``)."""


def trace_id(session_id: str) -> str:
    """The trace id of a session: 16 bytes of hex derived from its id (same session, same trace)."""
    return hashlib.sha256(f"contextledger-trace:{session_id}".encode()).hexdigest()[:32]


def span_id(kind: str, key: str) -> str:
    """The span id of a call, a compaction or a session root: 8 bytes of hex derived from its id."""
    return hashlib.sha256(f"contextledger-{kind}:{key}".encode()).hexdigest()[:16]


def _nanos(at: datetime | None) -> int:
    return 0 if at is None else int(at.timestamp() * 1_000_000) * 1_000


def _value(value: object) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    return {"stringValue": str(value)}


def _attributes(values: dict[str, object]) -> list[dict[str, Any]]:
    return [{"key": key, "value": _value(value)} for key, value in values.items() if value is not None]


def _span(
    *,
    trace: str,
    span: str,
    parent: str | None,
    name: str,
    kind: int,
    start: int,
    end: int,
    attributes: dict[str, object],
    status: tuple[int, str] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "traceId": trace,
        "spanId": span,
        "name": name,
        "kind": kind,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(max(start, end)),
        "attributes": _attributes(attributes),
    }
    if parent is not None:
        out["parentSpanId"] = parent
    if status is not None:
        out["status"] = {"code": status[0], "message": status[1]} if status[1] else {"code": status[0]}
    return out


def error_type(error: str) -> str:
    """The low-cardinality ``error.type`` of a failure text: its leading class name, else ``_OTHER``."""
    head = error.split(":", 1)[0].strip()
    return head if head.replace(".", "").replace("_", "").isalnum() and " " not in head else "_OTHER"


def _call_span(
    view: CallView, trace: str, parent: str, model: str | None, context: RenderedContext | None
) -> dict[str, Any]:
    record, usage = view.record, view.usage
    provider = "anthropic" if record.wire_format.startswith("anthropic") else "openai"
    start = _nanos(record.at)
    latency = usage.latency_ms if usage is not None and usage.latency_ms is not None else 0.0
    counts: Counter[str] = Counter()
    for run in record.dispositions:
        counts[run.disposition] += run.last - run.first + 1
    tiers = record.tiers
    attributes: dict[str, object] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.system": provider,
        "gen_ai.provider.name": provider,
        "gen_ai.conversation.id": record.session_id,
        # The convention sets the flag only when true: absent means nothing was compacted.
        "gen_ai.conversation.compacted": True if COMPACTING & counts.keys() else None,
        "gen_ai.request.model": model or (usage.model if usage else None),
        "gen_ai.response.model": usage.model if usage else None,
        "gen_ai.usage.input_tokens": usage.input_tokens if usage else None,
        "gen_ai.usage.output_tokens": usage.output_tokens if usage else None,
        "gen_ai.usage.cache_read.input_tokens": usage.cached_tokens if usage else None,
        "gen_ai.usage.cache_write.input_tokens": usage.cache_write_tokens if usage else None,
        "error.type": error_type(view.failure.error) if view.failure is not None else None,
        "contextledger.session_id": record.session_id,
        "contextledger.call_id": record.call_id,
        "contextledger.position": record.position,
        "contextledger.policy": record.policy,
        "contextledger.policy_hash": record.policy_hash,
        "contextledger.budget": record.budget,
        "contextledger.tokenizer": record.tokenizer,
        "contextledger.rendered_tokens": record.tokens,
        "contextledger.tiers.system": tiers.system,
        "contextledger.tiers.tools": tiers.tools,
        "contextledger.tiers.summary": tiers.summary,
        "contextledger.tiers.history": tiers.history,
        "contextledger.tiers.tool_results": tiers.tool_results,
        "contextledger.tiers.injected": tiers.injected,
        "contextledger.summary_id": record.summary_id,
        "contextledger.summary_round": record.summary_round,
        "contextledger.dispositions": ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
        **{f"contextledger.dispositions.{k}": v for k, v in sorted(counts.items())},
        "contextledger.stable_prefix": record.stable_prefix,
        "contextledger.context_sha": record.context_sha,
        "contextledger.payload_sha": record.payload_sha or None,
        "contextledger.prefix_sha": record.prefix_sha,
        "contextledger.wire_format": record.wire_format,
        "contextledger.latency_ms": usage.latency_ms if usage else None,
    }
    if context is not None:
        # On spans the convention allows the structured messages as a JSON string.
        attributes["gen_ai.system_instructions"] = _json(system_instructions(context))
        attributes["gen_ai.input.messages"] = _json(input_messages(context))
    failure = view.failure
    return _span(
        trace=trace,
        span=span_id("call", record.call_id),
        parent=parent,
        name=f"chat {model}" if model else "chat",
        kind=_CLIENT,
        start=start,
        end=start + int(latency * 1_000_000),
        attributes=attributes,
        status=(_ERROR, failure.error[:500]) if failure is not None else None,
    )


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _compaction_spans(
    ledger: Ledger, session_id: str, trace: str, calls: list[CallView], root: str
) -> list[dict[str, Any]]:
    """One span per compaction request: from CompactionRequested to its SummaryRecorded or last failure."""
    requests: dict[str, CompactionRequested] = {}
    ended: dict[str, tuple[datetime | None, tuple[int, str], str | None]] = {}
    attempts: Counter[str] = Counter()
    for recorded in SummaryStream(ledger.log, session_id).events():
        event = recorded.event
        if isinstance(event, CompactionRequested):
            requests[event.request_id] = event
        elif isinstance(event, SummaryAttemptStarted):
            attempts[event.request_id] += 1
        elif isinstance(event, SummaryAttemptFailed) and event.request_id not in ended:
            if event.dead_lettered:
                ended[event.request_id] = (event.at, (_ERROR, f"{event.error_type}: {event.message}"), None)
        elif isinstance(event, SummaryRecorded) and event.request_id is not None:
            ended[event.request_id] = (event.at, (_OK, ""), event.summary_id)
    positions = [v.record.position for v in calls]
    spans = []
    for request in requests.values():
        owner = next((v for v, p in zip(calls, positions, strict=True) if p >= request.planned_at), None)
        parent = span_id("call", owner.record.call_id) if owner is not None else root
        end_at, status, summary_id = ended.get(request.request_id, (request.at, None, None))
        attributes: dict[str, object] = {
            "gen_ai.operation.name": "compaction",
            "gen_ai.conversation.id": session_id,
            "contextledger.session_id": session_id,
            "contextledger.compaction.request_id": request.request_id,
            "contextledger.compaction.trigger": request.trigger,
            "contextledger.compaction.covers_from": request.covers_from,
            "contextledger.compaction.covers_through": request.covers_through,
            "contextledger.compaction.planned_at": request.planned_at,
            "contextledger.compaction.round": request.round,
            "contextledger.compaction.tokens_before": request.tokens_before,
            "contextledger.compaction.target_tokens": request.target_tokens,
            "contextledger.compaction.summarizer": request.summarizer or None,
            "contextledger.compaction.attempts": attempts[request.request_id],
            "contextledger.compaction.summary_id": summary_id,
            "contextledger.policy": request.policy or None,
        }
        spans.append(
            _span(
                trace=trace,
                span=span_id("compaction", request.request_id),
                parent=parent,
                name=f"compaction r{request.round}",
                kind=_INTERNAL,
                start=_nanos(request.at),
                end=_nanos(end_at),
                attributes=attributes,
                status=status,
            )
        )
    return spans


def _contexts(ledger: Ledger, session_id: str, calls: list[CallView]) -> list[RenderedContext | None]:
    """Each call's context rendered again from the log (checked against its recorded hash)."""
    recorder = CallRecorder(ledger)
    renderers: dict[str, Renderer] = {}
    contexts: list[RenderedContext | None] = []
    for view in calls:
        name = view.record.tokenizer
        tokenizer = "heuristic" if name.startswith("heuristic") else name
        renderer = renderers.setdefault(tokenizer, Renderer(ledger, tokenizer=tokenizer))
        contexts.append(recorder.rerender(renderer, session_id, view.record.call_id)[1])
    return contexts


def otlp_document(ledger: Ledger, session_id: str, *, content: bool = False) -> dict[str, Any]:
    """Return the session's calls (and compactions) as one OTLP/HTTP JSON ``ExportTraceServiceRequest``.

    A root span stands for the session; each recorded call is a ``chat`` client span under it with
    ``gen_ai.*`` attributes (usage joined when reported) and ``contextledger.*`` ones (policy,
    position, tiers, dispositions); each compaction is a child span of the first call at or after
    the position it was planned at. Ids derive from the session, call and request ids. A failed
    call's span has an error status and ``error.type``. With ``content`` (off by default: it holds
    the conversation's text), each call span also carries ``gen_ai.system_instructions`` and
    ``gen_ai.input.messages`` as rendered again from the log, a summary as a ``compaction`` part.

    Raises:
        ReplayMismatchError: With ``content``, a call no longer renders as recorded.
    """
    start_event = ledger.events(session_id, upto=1)[0].event
    model = start_event.model if isinstance(start_event, SessionStarted) else None
    calls = CallRecorder(ledger).calls(session_id)
    trace = trace_id(session_id)
    root = span_id("session", session_id)
    contexts = _contexts(ledger, session_id, calls) if content else [None] * len(calls)
    children = [
        _call_span(view, trace, root, model, context) for view, context in zip(calls, contexts, strict=True)
    ]
    children += _compaction_spans(ledger, session_id, trace, calls, root)
    starts = [int(s["startTimeUnixNano"]) for s in children] or [_nanos(start_event.at)]
    ends = [int(s["endTimeUnixNano"]) for s in children] or starts
    session_span = _span(
        trace=trace,
        span=root,
        parent=None,
        name=f"session {session_id}",
        kind=_INTERNAL,
        start=min(starts),
        end=max(ends),
        attributes={
            "gen_ai.conversation.id": session_id,
            "contextledger.session_id": session_id,
            "contextledger.calls": len(calls),
            "gen_ai.request.model": model,
        },
    )
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": _attributes({"service.name": SCOPE})},
                "scopeSpans": [{"scope": {"name": SCOPE}, "spans": [session_span, *children]}],
            }
        ]
    }


def export_otlp(ledger: Ledger, session_id: str, path: str | Path, *, content: bool = False) -> int:
    """Write the session's spans as OTLP JSON to ``path`` (whole file or nothing); return the span count."""
    document = otlp_document(ledger, session_id, content=content)
    write_whole(path, json.dumps(document, indent=1) + "\n")
    return len(document["resourceSpans"][0]["scopeSpans"][0]["spans"])
