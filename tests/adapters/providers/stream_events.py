"""The server-sent events of a reply as each API streams it (Chat chunks, Messages and Responses events)."""

from __future__ import annotations

import json
from typing import Any


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _halves(text: str) -> list[str]:
    middle = len(text) // 2
    return [part for part in (text[:middle], text[middle:]) if part]


def chat_events(reply: dict[str, Any], body: dict[str, Any]) -> list[str]:
    """``chat.completion.chunk`` events: role, text, tool calls by index, finish, usage, [DONE]."""
    message = reply["choices"][0]["message"]
    head = {k: reply[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return f"data: {_json(head | {'choices': [choice]})}\n\n"

    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"reasoning_content": p}) for p in _halves(message.get("reasoning_content") or "")]
    events += [chunk({"content": p}) for p in _halves(message.get("content") or "")]
    for index, call in enumerate(message.get("tool_calls") or ()):
        start = {"index": index, "id": call["id"], "type": "function"}
        events.append(
            chunk({"tool_calls": [start | {"function": {"name": call["function"]["name"], "arguments": ""}}]})
        )
        events += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": p}}]})
            for p in _halves(call["function"]["arguments"])
        ]
    events.append(chunk({}, reply["choices"][0]["finish_reason"]))
    if (body.get("stream_options") or {}).get("include_usage"):
        events.append(f"data: {_json(head | {'choices': [], 'usage': reply['usage']})}\n\n")
    return [*events, "data: [DONE]\n\n"]


def messages_events(reply: dict[str, Any]) -> list[str]:
    """Messages events: message_start, each block's start, deltas and stop, message_delta, message_stop."""

    def event(kind: str, data: dict[str, Any]) -> str:
        return f"event: {kind}\ndata: {_json({'type': kind} | data)}\n\n"

    start = reply | {"content": [], "stop_reason": None, "usage": reply["usage"] | {"output_tokens": 1}}
    events = [event("message_start", {"message": start})]
    for index, block in enumerate(reply["content"]):
        kind = block["type"]
        if kind == "thinking":
            empty, deltas = (
                {"type": "thinking", "thinking": "", "signature": ""},
                [
                    *({"type": "thinking_delta", "thinking": p} for p in _halves(block["thinking"])),
                    {"type": "signature_delta", "signature": block["signature"]},
                ],
            )
        elif kind == "text":
            empty = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in _halves(block["text"])]
        else:
            empty = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in _halves(_json(block["input"]))]
        events.append(event("content_block_start", {"index": index, "content_block": empty}))
        events += [event("content_block_delta", {"index": index, "delta": d}) for d in deltas]
        events.append(event("content_block_stop", {"index": index}))
    delta = {"stop_reason": reply["stop_reason"], "stop_sequence": None}
    events.append(
        event("message_delta", {"delta": delta, "usage": {"output_tokens": reply["usage"]["output_tokens"]}})
    )
    return [*events, event("message_stop", {})]


def responses_events(reply: dict[str, Any]) -> list[str]:
    """Responses events: created, each item added, its text or argument deltas, done, completed."""
    number = iter(range(1_000_000))

    def event(kind: str, data: dict[str, Any]) -> str:
        return f"event: {kind}\ndata: {_json({'type': kind, 'sequence_number': next(number)} | data)}\n\n"

    events = [event("response.created", {"response": reply | {"status": "in_progress", "output": []}})]
    for index, item in enumerate(reply["output"]):
        where = {"output_index": index, "item_id": item["id"]}
        if item["type"] == "message":
            text = item["content"][0]["text"]
            events.append(
                event("response.output_item.added", {"output_index": index, "item": item | {"content": []}})
            )
            part = {"type": "output_text", "text": "", "annotations": []}
            events.append(event("response.content_part.added", where | {"content_index": 0, "part": part}))
            events += [
                event("response.output_text.delta", where | {"content_index": 0, "delta": p, "logprobs": []})
                for p in _halves(text)
            ]
            events.append(
                event("response.output_text.done", where | {"content_index": 0, "text": text, "logprobs": []})
            )
            events.append(
                event(
                    "response.content_part.done", where | {"content_index": 0, "part": part | {"text": text}}
                )
            )
        elif item["type"] == "function_call":
            events.append(
                event("response.output_item.added", {"output_index": index, "item": item | {"arguments": ""}})
            )
            events += [
                event("response.function_call_arguments.delta", where | {"delta": p})
                for p in _halves(item["arguments"])
            ]
            events.append(
                event(
                    "response.function_call_arguments.done",
                    where | {"arguments": item["arguments"], "name": item["name"]},
                )
            )
        else:
            events.append(event("response.output_item.added", {"output_index": index, "item": item}))
        events.append(event("response.output_item.done", {"output_index": index, "item": item}))
    return [*events, event("response.completed", {"response": reply})]


def sse_events(wire: str, reply: dict[str, Any], body: dict[str, Any]) -> list[str]:
    """The events of ``reply`` in ``wire`` (``chat``, ``messages``, ``responses``)."""
    if wire == "chat":
        return chat_events(reply, body)
    if wire == "messages":
        return messages_events(reply)
    return responses_events(reply)
