"""OpenHands event streams (trajectory exports, ``history`` of ``output.jsonl``) into ledger sessions."""

from __future__ import annotations

from collections import Counter
from typing import Any

import msgspec
from contextledger.adapters.importers.base import CallBook, SessionDraft, media_part
from contextledger.adapters.importers.source import Source

__all__ = ["parse_openhands"]

_SKIPPED_ACTIONS = {"change_agent_state", "system", "recall", "null"}
_SKIPPED_OBSERVATIONS = {"null", "agent_state_changed", "recall"}
_NOT_ARGUMENTS = {
    "thought",
    "impl_source",
    "translated_ipython_code",
    "confirmation_state",
    "hidden",
    "blocking",
}


class ToolCallMetadata(msgspec.Struct, kw_only=True):
    """The native tool call behind an action (and echoed on its observation)."""

    function_name: str
    tool_call_id: str
    model_response: dict[str, Any] | None = None
    total_calls_in_response: int | None = None


class OHEvent(msgspec.Struct, kw_only=True):
    """An action or observation event (unknown fields are ignored)."""

    id: int
    source: str | None = None
    timestamp: str | None = None
    message: str | None = None
    action: str | None = None
    observation: str | None = None
    args: dict[str, Any] = {}
    content: str | None = None
    extras: dict[str, Any] = {}
    cause: int | None = None
    tool_call_metadata: ToolCallMetadata | None = None
    success: bool | None = None


def _response_message(response: dict[str, Any] | None) -> dict[str, Any]:
    choices = (response or {}).get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        message = choices[0].get("message")
        if isinstance(message, dict):
            return message
    return {}


def _arguments(event: OHEvent, tcm: ToolCallMetadata, draft: SessionDraft) -> str | dict[str, Any]:
    for call in _response_message(tcm.model_response).get("tool_calls") or []:
        if isinstance(call, dict) and call.get("id") == tcm.tool_call_id:
            function = call.get("function")
            if isinstance(function, dict) and isinstance(function.get("arguments"), str | dict):
                return function["arguments"]  # type: ignore[no-any-return]
    draft.note("some tool call arguments were rebuilt from the action's args (no model_response tool call)")
    return {k: v for k, v in event.args.items() if k not in _NOT_ARGUMENTS}


class _Stream:
    """State of one event stream being mapped."""

    def __init__(self, source: Source, draft: SessionDraft) -> None:
        self.source = source
        self.draft = draft
        self.book = CallBook()
        self.action_ids: dict[int, str] = {}
        self.response_id: str | None = None
        self.reply: dict[str, Any] | None = None
        """The assistant message of ``response_id``: its later actions join it, observations between."""
        self.skipped: Counter[str] = Counter()

    def meta(self, event: OHEvent, ref: str) -> dict[str, Any]:
        meta: dict[str, Any] = {"source_ref": ref, "event_id": event.id}
        if event.timestamp:
            meta["source_timestamp"] = event.timestamp
        return meta

    def action(self, event: OHEvent, ref: str) -> None:
        draft = self.draft
        text = event.args.get("content") if event.action == "message" else None
        if event.source == "user" and event.action == "message":
            words = str(text or event.message or "")
            user: dict[str, Any] = {"role": "user", "content": words, "meta": self.meta(event, ref)}
            urls = event.args.get("image_urls") or []
            parts = [{"type": "image_url", "image_url": {"url": url}} for url in urls if isinstance(url, str)]
            media = [m for m in (media_part(p, len(words), draft) for p in parts) if m is not None]
            draft.messages.append({**user, "media": media} if media else user)
            self.response_id = None
            return
        if event.source != "agent" or event.action in _SKIPPED_ACTIONS:
            self.skipped[f"{event.source}/{event.action}"] += 1
            return
        tcm = event.tool_call_metadata
        if tcm is None and event.action in {"message", "finish"}:
            said = text or event.args.get("final_thought") or event.args.get("thought") or event.message
            draft.messages.append(
                {"role": "assistant", "content": str(said or ""), "meta": self.meta(event, ref)}
            )
            self.response_id = None
            return
        self._call(event, tcm, ref)

    def _call(self, event: OHEvent, tcm: ToolCallMetadata | None, ref: str) -> None:
        draft = self.draft
        response = tcm.model_response if tcm else None
        response_id = response.get("id") if isinstance(response, dict) else None
        # OpenHands runs a response's calls one a step, each action after the last one's observation
        reply = self.reply if response_id is not None and response_id == self.response_id else None
        if reply is None:
            said = _response_message(response).get("content") or event.args.get("thought") or None
            model = response.get("model") if isinstance(response, dict) else None
            reply = {
                "role": "assistant",
                "content": said,
                "tool_calls": [],
                "model": model,
                "meta": self.meta(event, ref),
            }
            if isinstance(response, dict) and isinstance(response.get("usage"), dict):
                reply["meta"]["usage"] = response["usage"]
            draft.messages.append(reply)
            draft.model = draft.model or (model if isinstance(model, str) else None)
            self.response_id, self.reply = response_id, reply
        if tcm is not None:
            source_id, name, arguments = tcm.tool_call_id, tcm.function_name, _arguments(event, tcm, draft)
        else:
            source_id, name = f"event_{event.id}", str(event.action)
            arguments = {k: v for k, v in event.args.items() if k not in _NOT_ARGUMENTS}
            draft.note(
                "actions without tool_call_metadata became calls named after the action, ids event_<id>"
            )
        call_id = self.book.issue(source_id, name)
        reply["tool_calls"].append({"id": call_id, "name": name, "arguments": arguments})
        self.action_ids[event.id] = source_id

    def observation(self, event: OHEvent, ref: str) -> None:
        draft = self.draft
        if event.observation in _SKIPPED_OBSERVATIONS:
            self.skipped[f"observation/{event.observation}"] += 1
            return
        meta = self.meta(event, ref) | {"observation": event.observation, "cause": event.cause}
        exit_code = (
            (event.extras.get("metadata") or {}).get("exit_code") if isinstance(event.extras, dict) else None
        )
        if exit_code is not None:
            meta["exit_code"] = exit_code
        source_id = self.action_ids.get(event.cause) if event.cause is not None else None
        if source_id is None and event.tool_call_metadata is not None:
            source_id = event.tool_call_metadata.tool_call_id
        call_id = self.book.resolve(source_id) if source_id is not None else None
        if call_id is None and event.tool_call_metadata is None and source_id is None:
            draft.messages.append({"role": "user", "content": event.content or "", "meta": meta})
            draft.note(
                "observations caused by no tool call are user messages (as OpenHands shows them to the model)"
            )
            return
        if call_id is None:
            draft.metadata.setdefault("dropped_results", []).append({"source_ref": ref, "call_id": source_id})
            draft.note(
                "observations whose tool call is missing or already answered were dropped, see metadata"
            )
            return
        is_error = event.observation == "error" or event.success is False
        result = {
            "role": "tool",
            "call_id": call_id,
            "tool_name": self.book.name_of(call_id),
            "is_error": is_error,
        }
        draft.messages.append(result | {"content": event.content or "", "meta": meta})


def _stream(source: Source, events: list[OHEvent], path: str, native: str) -> SessionDraft:
    draft = SessionDraft("openhands", source.path, native, source_ref=path)
    draft.source_messages = len(events)
    stream = _Stream(source, draft)
    for index, event in enumerate(events):
        ref = f"{path}[{index}]"
        if event.action is not None:
            stream.action(event, ref)
        elif event.observation is not None:
            stream.observation(event, ref)
        else:
            raise source.error(ref, "expected an event with 'action' or 'observation'")
    draft.note("the event stream records no system prompt or tool schemas")
    draft.note("timestamps carry no time zone: kept as text in meta.source_timestamp, not as event times")
    if any(e.extras for e in events if e.observation):
        draft.note(
            "observation extras (screenshots, file contents, metadata) are not imported, except exit_code"
        )
    if stream.skipped:
        draft.metadata["skipped_events"] = dict(sorted(stream.skipped.items()))
        draft.note("state-change, environment and empty events are not messages: counts kept in metadata")
    if stream.book.pending:
        draft.note(
            f"{len(stream.book.pending)} tool call(s) never got an observation (the stream ends first)"
        )
    return draft


def parse_openhands(source: Source) -> list[SessionDraft]:
    """Parse an OpenHands event stream: a JSON array of events, or an object whose ``history`` is one.

    User ``message`` actions are user messages; agent actions with ``tool_call_metadata`` are tool
    calls (actions from one model response share one assistant message); observations pair with
    their action by ``cause`` (else by tool_call_id); state-change events are counted, not stored. An
    evaluation's ``output.jsonl`` (one such object a line, one instance each) gives a session a line.
    """
    if source.looks_like_json_lines():
        return [_history(source, value, f"line {number}: ") for number, value in source.lines()]
    return [_history(source, source.document, "")]


def _history(source: Source, document: Any, line: str) -> SessionDraft:
    path = f"{line}$"
    native = ""
    if isinstance(document, dict) and isinstance(document.get("history"), list):
        native = str(document.get("instance_id") or document.get("id") or "")
        document, path = document["history"], f"{line}$.history"
    if not isinstance(document, list) or not document:
        raise source.error(path, "expected a non-empty JSON array of OpenHands events")
    events = source.convert(document, list[OHEvent], path)
    if not native and events[0].timestamp:
        native = events[0].timestamp
    return _stream(source, events, path, native)
