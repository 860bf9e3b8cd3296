"""Build a summarizer from a kind name and settings, reading API keys and base URLs from the environment."""

from __future__ import annotations

import os
from typing import Literal

from contextledger.adapters.summarizers.extractive import ExtractiveSummarizer
from contextledger.adapters.summarizers.http import HttpPolicy
from contextledger.adapters.summarizers.models import AnthropicSummarizer, OpenAICompatibleSummarizer
from contextledger.domain.errors import ConfigError
from contextledger.domain.ports import TokenCounter
from contextledger.projections.summary_requests import Summarizer

__all__ = ["SUMMARIZER_KINDS", "SummarizerKind", "make_summarizer"]

SummarizerKind = Literal["extractive", "openai", "anthropic"]
SUMMARIZER_KINDS: tuple[SummarizerKind, ...] = ("extractive", "openai", "anthropic")


def make_summarizer(
    kind: str,
    *,
    counter: TokenCounter | None = None,
    model: str | None = None,
    base_url: str | None = None,
    timeout: float = 60.0,
) -> Summarizer:
    """Return the summarizer called ``kind``.

    ``openai`` (any OpenAI-compatible server) reads ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL``;
    ``anthropic`` reads ``ANTHROPIC_API_KEY`` and ``ANTHROPIC_BASE_URL``; an explicit ``base_url``
    wins. Keys are only ever taken from the environment, never from arguments that could be logged.
    """
    policy = HttpPolicy(timeout=timeout)
    if kind == "extractive":
        return ExtractiveSummarizer(counter=counter)
    if kind == "openai":
        return OpenAICompatibleSummarizer(
            model=model or "gpt-4o-mini",
            base_url=base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1",
            api_key=os.environ.get("OPENAI_API_KEY"),
            policy=policy,
        )
    if kind == "anthropic":
        return AnthropicSummarizer(
            model=model or "claude-haiku-4-5",
            base_url=base_url or os.environ.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com",
            api_key=os.environ.get("ANTHROPIC_API_KEY"),
            policy=policy,
        )
    raise ConfigError(f"unknown summarizer {kind!r}: use one of {', '.join(SUMMARIZER_KINDS)}")
