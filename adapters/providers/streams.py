"""Streamed replies assembled: Chat chunks, Messages events and Responses events into each wire's reply."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["StreamAssembler"]


def _plain(event: object) -> Any:
    """An SDK event as its dict (the SDKs' parsed generics dump with warnings pydantic can skip)."""
    dump = getattr(event, "model_dump", None)
    return dump(mode="json", exclude_none=True, warnings=False) if callable(dump) else event


def _input(text: str) -> Any:
    """A ``tool_use`` block's input from its streamed JSON; the text itself when it is not whole JSON.

    A reply cut by ``max_tokens`` inside a call closes the block with part of its input: that is a
    complete response, not a broken stream. The text is stored verbatim as the call's arguments (sent
    back wrapped as ``_raw_arguments``), as a non-streamed reply's would be.
    """
    try:
        return json.loads(text or "{}")
    except ValueError:
        return text


class StreamAssembler:
    """Collects a reply's stream events, whatever SDK object carries them, into the non-streamed reply.

    Accepted: raw SDK streams (``create(..., stream=True)``) and the events of the SDKs' stream
    managers (``messages.stream``, ``chat.completions.stream``, ``responses.stream``), as objects or
    dicts. Events of other types (the managers' derived ``text``/``thinking`` events) are ignored.

    Args:
        wire: ``openai`` (Chat Completions), ``openai-responses`` or ``anthropic``.
    """

    def __init__(self, wire: str) -> None:
        self.wire = wire
        self.events = 0
        self._chat: dict[str, Any] = {"tool_calls": {}}
        self._message: dict[str, Any] = {}
        self._blocks: dict[int, dict[str, Any]] = {}
        self._json: dict[int, str] = {}
        self._response: dict[str, Any] | None = None
        self._items: dict[int, dict[str, Any]] = {}
        self._texts: dict[int, str] = {}

    def add(self, event: object) -> None:
        """Take one event of the stream."""
        plain = _plain(event)
        if not isinstance(plain, dict):
            return
        self.events += 1
        if plain.get("type") == "chunk" and isinstance(plain.get("chunk"), dict):
            plain = plain["chunk"]  # openai's ChatCompletionStream wraps each chunk
        if self.wire == "openai":
            self._add_chunk(plain)
        elif self.wire == "anthropic":
            self._add_message_event(plain)
        else:
            self._add_response_event(plain)

    # -- Chat Completions ----------------------------------------------------------------------

    def _add_chunk(self, chunk: dict[str, Any]) -> None:
        if chunk.get("object") != "chat.completion.chunk":
            return
        state = self._chat
        state.setdefault("id", chunk.get("id"))
        state.setdefault("model", chunk.get("model"))
        if isinstance(chunk.get("usage"), dict):
            state["usage"] = chunk["usage"]
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            for key in ("content", "reasoning_content", "reasoning"):
                if isinstance(delta.get(key), str):
                    state[key] = state.get(key, "") + delta[key]
            for call in delta.get("tool_calls") or ():
                kept = state["tool_calls"].setdefault(
                    call.get("index", 0), {"type": "function", "function": {"name": "", "arguments": ""}}
                )
                if call.get("id"):
                    kept["id"] = call["id"]
                function = call.get("function") or {}
                kept["function"]["name"] += function.get("name") or ""
                kept["function"]["arguments"] += function.get("arguments") or ""
            if choice.get("finish_reason"):
                state["finish_reason"] = choice["finish_reason"]

    def _chat_reply(self) -> dict[str, Any]:
        state = self._chat
        message: dict[str, Any] = {"role": "assistant", "content": state.get("content")}
        for key in ("reasoning_content", "reasoning"):
            if key in state:
                message[key] = state[key]
        calls = [state["tool_calls"][i] for i in sorted(state["tool_calls"])]
        if calls:
            message["tool_calls"] = calls
        reply: dict[str, Any] = {
            "id": state.get("id"),
            "object": "chat.completion",
            "model": state.get("model"),
            "choices": [{"index": 0, "message": message, "finish_reason": state.get("finish_reason")}],
        }
        if "usage" in state:
            reply["usage"] = state["usage"]
        return reply

    # -- Anthropic Messages --------------------------------------------------------------------

    def _add_message_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "message_start":
            self._message = dict(event.get("message") or {})
        elif kind == "content_block_start":
            self._blocks[event["index"]] = dict(event.get("content_block") or {})
        elif kind == "content_block_delta":
            self._delta(event["index"], event.get("delta") or {})
        elif kind == "content_block_stop":
            index = event["index"]
            if index in self._json and index in self._blocks:
                self._blocks[index]["input"] = _input(self._json[index])
        elif kind == "message_delta":
            self._message.update(event.get("delta") or {})
            usage = dict(self._message.get("usage") or {})
            usage.update({k: v for k, v in (event.get("usage") or {}).items() if v is not None})
            self._message["usage"] = usage

    def _delta(self, index: int, delta: dict[str, Any]) -> None:
        block = self._blocks.setdefault(index, {})
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = block.get("text", "") + delta.get("text", "")
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
        elif kind == "signature_delta":
            block["signature"] = block.get("signature", "") + delta.get("signature", "")
        elif kind == "input_json_delta":
            self._json[index] = self._json.get(index, "") + delta.get("partial_json", "")

    def _message_reply(self, *, complete: bool) -> dict[str, Any]:
        blocks = [self._blocks[i] for i in sorted(self._blocks)]
        if not complete:  # a tool call whose input did not arrive whole is no call
            blocks = [b for b in blocks if b.get("type") != "tool_use"]
        return {**self._message, "content": blocks}

    # -- OpenAI Responses ----------------------------------------------------------------------

    def _add_response_event(self, event: dict[str, Any]) -> None:
        kind = str(event.get("type", ""))
        if kind in {"response.completed", "response.incomplete"}:
            self._response = dict(event.get("response") or {})
        elif kind == "response.created":
            self._message = dict(event.get("response") or {})
        elif kind == "response.output_item.done":
            self._items[event["output_index"]] = dict(event.get("item") or {})
        elif kind == "response.output_text.delta":
            index = event["output_index"]
            self._texts[index] = self._texts.get(index, "") + str(event.get("delta", ""))

    def _response_reply(self) -> dict[str, Any]:
        if self._response is not None:
            return self._response
        items = [self._items[i] for i in sorted(self._items)]
        for index, text in sorted(self._texts.items()):
            if index not in self._items:
                content = [{"type": "output_text", "text": text, "annotations": []}]
                items.append({"type": "message", "role": "assistant", "content": content})
        return {**self._message, "output": [i for i in items if i.get("type") != "function_call"]}

    # -- results --------------------------------------------------------------------------------

    def reply(self) -> dict[str, Any]:
        """The reply as the non-streamed API returns it (call once the stream has ended)."""
        if self.wire == "openai":
            return self._chat_reply()
        if self.wire == "anthropic":
            return self._message_reply(complete=True)
        return self._response_reply()

    def partial_text(self) -> str:
        """The text that arrived (of an interrupted stream): reply text, without unfinished calls."""
        if self.wire == "openai":
            return str(self._chat.get("content") or "")
        if self.wire == "anthropic":
            blocks = self._message_reply(complete=False)["content"]
            return "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
        parts = [self._texts[i] for i in sorted(self._texts)]
        return "".join(parts)
