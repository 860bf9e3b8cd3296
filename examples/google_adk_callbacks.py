"""Recipe: contextledger as the context layer of a Google ADK agent, over its model callbacks.

``before_model_callback`` records what is new in the request (the user's text, tool responses),
then replaces ``llm_request.contents`` with the session's rendered, token-budgeted context;
``after_model_callback`` records the model's reply and its usage. The context is rendered and
audited in the Chat Completions wire (the ledger has no Gemini wire) and converted to Gemini
``Content`` here, so the audit record is the Chat payload, not Gemini's own bytes.

    loop = contextledger.AgentContext.start(ledger, provider="openai", system_prompt="...", tools=schemas)
    context = AdkContext(loop)
    agent = LlmAgent(name="a", model="gemini-2.5-flash", tools=[...], **context.callbacks())
"""

# ruff: noqa: INP001 - an example module, not part of a package

from __future__ import annotations

import json
import uuid
from typing import Any

import contextledger
from google.adk.agents.callback_context import CallbackContext
from google.adk.models import LlmRequest, LlmResponse
from google.genai import types


class AdkContext:
    """The two ADK model callbacks over one ``AgentContext`` (provider ``openai``)."""

    def __init__(self, context: contextledger.AgentContext) -> None:
        self.context = context
        self.seen = 0  # contents of ADK's history already recorded (the reply is recorded by after_model)
        self.pending: str | None = None
        self.issued: list[tuple[str, str]] = []  # (id, name) of the calls the last reply made

    def callbacks(self) -> dict[str, Any]:
        """``LlmAgent`` keyword arguments installing the callbacks."""
        return {"before_model_callback": self.before_model, "after_model_callback": self.after_model}

    def before_model(self, callback_context: CallbackContext, llm_request: LlmRequest) -> LlmResponse | None:
        """Record the new contents; send the rendered context instead of the whole history."""
        del callback_context
        history = len(
            llm_request.contents
        )  # ADK's own history: the rendered context may be shorter or longer
        for content in llm_request.contents[self.seen :]:
            self._record(content)
        request = self.context.request()
        system, llm_request.contents = to_contents(request.arguments["messages"])
        llm_request.config.system_instruction = system
        self.seen = history
        self.pending = request.call_id
        return None  # None: ADK calls the model with the changed request

    def after_model(self, callback_context: CallbackContext, llm_response: LlmResponse) -> LlmResponse | None:
        """Record the reply (text and function calls) and its usage."""
        del callback_context
        if self.pending is not None and llm_response.content is not None and not llm_response.partial:
            for part in llm_response.content.parts or []:
                if part.function_call is not None and not part.function_call.id:
                    part.function_call.id = f"adk-{uuid.uuid4()}"  # Gemini gives none; ADK keeps this one
                if part.function_call is not None:
                    self.issued.append((str(part.function_call.id), str(part.function_call.name)))
            self.context.record_response(self.pending, chat_reply(llm_response))
            self.pending = None
        return None

    def _record(self, content: types.Content) -> None:
        parts = content.parts or []
        results = [p.function_response for p in parts if p.function_response is not None]
        for result in results:
            output = result.response or {}
            text = output.get("result") if isinstance(output.get("result"), str) else json.dumps(output)
            self.context.record_tool_result(self._call_id(result), text)
        texts = "".join(p.text or "" for p in parts if p.function_response is None)
        if content.role == "user" and texts:
            self.context.add_user_message(texts)

    def _call_id(self, result: types.FunctionResponse) -> str:
        """The id of the call a response answers (ADK strips its own ids before the model sees them)."""
        for index, (call_id, name) in enumerate(self.issued):
            if call_id == result.id or (not result.id and name == result.name):
                del self.issued[index]
                return call_id
        return str(result.id)


def to_contents(messages: list[dict[str, Any]]) -> tuple[str | None, list[types.Content]]:
    """Chat Completions messages as (system instruction, Gemini contents)."""
    system: str | None = None
    names: dict[str, str] = {}
    contents: list[types.Content] = []
    for message in messages:
        role = message["role"]
        if role == "system":
            system = message["content"]
        elif role == "assistant":
            parts = [types.Part(text=message["content"])] if message.get("content") else []
            for call in message.get("tool_calls") or ():
                names[call["id"]] = call["function"]["name"]
                arguments = json.loads(call["function"]["arguments"] or "{}")
                parts.append(
                    types.Part(
                        function_call=types.FunctionCall(
                            id=call["id"], name=names[call["id"]], args=arguments
                        )
                    )
                )
            contents.append(types.Content(role="model", parts=parts))
        elif role == "tool":
            name = names.get(message["tool_call_id"], "tool")
            response = types.FunctionResponse(
                id=message["tool_call_id"], name=name, response={"result": message["content"]}
            )
            part = types.Part(function_response=response)
            previous = contents[-1] if contents else None
            if previous is not None and previous.parts and previous.parts[0].function_response is not None:
                previous.parts.append(part)  # parallel calls' responses go in one user turn
            else:
                contents.append(types.Content(role="user", parts=[part]))
        else:
            contents.append(types.Content(role="user", parts=[types.Part(text=message["content"])]))
    return system, contents


def chat_reply(llm_response: LlmResponse) -> dict[str, Any]:
    """An ADK reply as a Chat Completions reply dict (what ``record_response`` parses)."""
    parts = llm_response.content.parts or [] if llm_response.content else []
    text = "".join(p.text or "" for p in parts if p.text and not p.thought)
    calls = [
        {
            "id": p.function_call.id,
            "type": "function",
            "function": {"name": p.function_call.name, "arguments": json.dumps(p.function_call.args or {})},
        }
        for p in parts
        if p.function_call is not None
    ]
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = calls
    usage = llm_response.usage_metadata
    reply: dict[str, Any] = {"choices": [{"message": message}], "model": llm_response.model_version}
    if usage is not None:
        reply["usage"] = {
            "prompt_tokens": usage.prompt_token_count,
            "completion_tokens": usage.candidates_token_count,
        }
    return reply
