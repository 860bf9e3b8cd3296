"""Model summarizers over HTTP: OpenAI-compatible chat completions and Anthropic Messages, prefix first."""

from __future__ import annotations

from typing import Any

import httpx
import msgspec
from contextledger.adapters.formats.anthropic import to_anthropic
from contextledger.adapters.formats.openai import to_openai
from contextledger.adapters.summarizers.http import HttpPolicy, post_json, redacting
from contextledger.domain.content import content_address
from contextledger.domain.errors import SummaryRejectedError
from contextledger.projections.summary_requests import (
    SUMMARY_INSTRUCTION,
    SUMMARY_SYSTEM,
    SummaryDraft,
    SummaryRequest,
    check_summary_text,
    summary_prompt,
)

__all__ = ["AnthropicSummarizer", "OpenAICompatibleSummarizer"]


def _config_sha(kind: str, **fields: Any) -> str:
    """Hash of what changes the output; secrets are never part of it."""
    fields["instruction"] = content_address(SUMMARY_INSTRUCTION)
    return content_address(kind + msgspec.json.encode(fields).decode())[:16]


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) else None


def _object(value: Any) -> dict[str, Any]:
    """The value when it is a JSON object, else an empty one (usage fields are optional)."""
    return value if isinstance(value, dict) else {}


class OpenAICompatibleSummarizer:
    """Summaries from any OpenAI-compatible ``/chat/completions`` server (OpenAI, vLLM, Ollama, llama.cpp).

    With a live prefix, the request is that prefix exactly as the agent sent it (system, history,
    tools) followed by the summarization instruction, so the provider's prompt cache serves the prefix;
    ``tool_choice`` is ``none`` so the model answers in text.

    Args:
        model: The model name the server knows.
        base_url: The API root, e.g. ``https://api.openai.com/v1`` or ``http://127.0.0.1:8000/v1``.
        api_key: Sent as a bearer token; never logged, hashed or put in an error message.
        policy: Timeouts and retries.
        client: An ``httpx.Client`` to reuse (one is created otherwise).
    """

    model_written = True
    """A model writes the text: the worker checks it against the session-state card (retry, withhold)."""

    def __init__(
        self,
        *,
        model: str,
        base_url: str = "https://api.openai.com/v1",
        api_key: str | None = None,
        temperature: float = 0.2,
        policy: HttpPolicy | None = None,
        client: httpx.Client | None = None,
    ) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key or ""
        self.temperature = temperature
        self.policy = policy or HttpPolicy()
        self.client = client or httpx.Client()

    @property
    def name(self) -> str:
        """The summarizer kind recorded with every artifact."""
        return "openai-compatible"

    @property
    def config_sha(self) -> str:
        """Hash of the server, model and sampling settings (not the key)."""
        return _config_sha(self.name, url=self.base_url, model=self.model, temperature=self.temperature)

    def request_body(self, request: SummaryRequest) -> dict[str, Any]:
        """Return the JSON body sent for ``request``: the live prefix, then the instruction."""
        prompt = summary_prompt(request)
        if request.prefix is not None:
            payload = to_openai(request.prefix)
            messages = [*payload["messages"], {"role": "user", "content": prompt}]
            tools = payload.get("tools")
        else:
            messages = [{"role": "system", "content": SUMMARY_SYSTEM}, {"role": "user", "content": prompt}]
            tools = None
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "max_tokens": request.max_tokens,
            "temperature": self.temperature,
        }
        if tools:
            body["tools"] = tools
            body["tool_choice"] = "none"
        return body

    def summarize(self, request: SummaryRequest) -> SummaryDraft:
        """Ask the server for the summary; raise ``SummarizerError`` subclasses on any failure."""
        with redacting((self._api_key,)):
            return self._summarize(request)

    def _summarize(self, request: SummaryRequest) -> SummaryDraft:
        body = self.request_body(request)
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        url = f"{self.base_url}/chat/completions"
        data = post_json(
            self.client, url, body, headers=headers, policy=self.policy, secrets=(self._api_key,)
        )
        try:
            choice = data["choices"][0]
            text = choice["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise SummaryRejectedError(f"{url} answered without choices[0].message.content") from None
        if choice.get("finish_reason") == "length":
            raise SummaryRejectedError(f"{url} cut the summary at max_tokens={request.max_tokens}")
        refusal = _object(choice.get("message")).get("refusal")
        if choice.get("finish_reason") == "content_filter" or refusal:
            raise SummaryRejectedError(f"{url} refused to summarize ({refusal or 'content_filter'})")
        usage = _object(data.get("usage"))
        details = _object(usage.get("prompt_tokens_details"))
        return SummaryDraft(
            text=check_summary_text(text),
            model=str(data.get("model") or self.model),
            prompt_sha=content_address(msgspec.json.encode(body).decode()),
            input_tokens=_int(usage.get("prompt_tokens")),
            cached_tokens=_int(details.get("cached_tokens")),
            output_tokens=_int(usage.get("completion_tokens")),
        )


class AnthropicSummarizer:
    """Summaries from the Anthropic Messages API (``POST {base_url}/v1/messages``), live prefix first.

    The request keeps the agent's system blocks, history and tools (with their ``cache_control``
    breakpoints) and appends the instruction as a last user turn; ``tool_choice`` is ``none``.
    """

    model_written = True
    """A model writes the text: the worker checks it against the session-state card (retry, withhold)."""

    def __init__(
        self,
        *,
        model: str,
        base_url: str = "https://api.anthropic.com",
        api_key: str | None = None,
        temperature: float = 0.2,
        version: str = "2023-06-01",
        policy: HttpPolicy | None = None,
        client: httpx.Client | None = None,
    ) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/").removesuffix("/v1")
        self._api_key = api_key or ""
        self.temperature = temperature
        self.version = version
        self.policy = policy or HttpPolicy()
        self.client = client or httpx.Client()

    @property
    def name(self) -> str:
        """The summarizer kind recorded with every artifact."""
        return "anthropic"

    @property
    def config_sha(self) -> str:
        """Hash of the server, model, API version and sampling settings (not the key)."""
        return _config_sha(
            self.name, url=self.base_url, model=self.model, temperature=self.temperature, version=self.version
        )

    def request_body(self, request: SummaryRequest) -> dict[str, Any]:
        """Return the JSON body sent for ``request``: the live prefix, then the instruction."""
        instruction = {"role": "user", "content": [{"type": "text", "text": summary_prompt(request)}]}
        if request.prefix is not None:
            body: dict[str, Any] = to_anthropic(request.prefix)
            body["messages"] = [*body["messages"], instruction]
        else:
            body = {"system": SUMMARY_SYSTEM, "messages": [instruction]}
        body.update(model=self.model, max_tokens=request.max_tokens, temperature=self.temperature)
        if body.get("tools"):
            body["tool_choice"] = {"type": "none"}
        return body

    def summarize(self, request: SummaryRequest) -> SummaryDraft:
        """Ask the API for the summary; raise ``SummarizerError`` subclasses on any failure."""
        with redacting((self._api_key,)):
            return self._summarize(request)

    def _summarize(self, request: SummaryRequest) -> SummaryDraft:
        body = self.request_body(request)
        headers = {"anthropic-version": self.version}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        url = f"{self.base_url}/v1/messages"
        data = post_json(
            self.client, url, body, headers=headers, policy=self.policy, secrets=(self._api_key,)
        )
        blocks = data.get("content")
        if not isinstance(blocks, list):
            raise SummaryRejectedError(f"{url} answered without a content list")
        text = "".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")
        if data.get("stop_reason") == "max_tokens":
            raise SummaryRejectedError(f"{url} cut the summary at max_tokens={request.max_tokens}")
        if data.get("stop_reason") == "refusal":
            raise SummaryRejectedError(f"{url} refused to summarize (stop_reason refusal)")
        usage = _object(data.get("usage"))
        return SummaryDraft(
            text=check_summary_text(text),
            model=str(data.get("model") or self.model),
            prompt_sha=content_address(msgspec.json.encode(body).decode()),
            input_tokens=_int(usage.get("input_tokens")),
            cached_tokens=_int(usage.get("cache_read_input_tokens")),
            output_tokens=_int(usage.get("output_tokens")),
        )
