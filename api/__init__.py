"""contextledger: the context layer of LLM agents, event-sourced.

``import contextledger`` is the whole public API: open a ledger, append sessions, read them back,
import transcripts, and render the token-budgeted context to send (OpenAI or Anthropic payloads).
Names load on first use (PEP 562 ``__getattr__``): importing the package loads no store, importer,
tokenizer or wire format, so ``import contextledger`` and the CLI start fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from contextledger.adapters.follow.eventsourcing_upstream import EventsourcingUpstream
    from contextledger.adapters.formats.anthropic import anthropic_call_ids, to_anthropic
    from contextledger.adapters.formats.openai import to_openai
    from contextledger.adapters.formats.openai_responses import to_openai_responses
    from contextledger.adapters.importers.service import import_file, import_files
    from contextledger.adapters.policy_files import load_policy_file, resolve_policy
    from contextledger.adapters.providers.agent import AgentContext, AsyncAgentContext
    from contextledger.adapters.providers.replay import ReplayedPayload, replay_call
    from contextledger.adapters.summarizers.extractive import ExtractiveSummarizer
    from contextledger.adapters.summarizers.factory import make_summarizer
    from contextledger.adapters.summarizers.models import AnthropicSummarizer, OpenAICompatibleSummarizer
    from contextledger.application.agent.agent_types import AgentRequest, ToolCallRequest
    from contextledger.application.agent.follower import Follower, FollowReport
    from contextledger.application.audit.call_recorder import CallRecorder
    from contextledger.application.audit.forensics import why
    from contextledger.application.audit.why_answer import WhyAnswer
    from contextledger.application.kernel.fork import fork_session
    from contextledger.application.kernel.ledger import Ledger
    from contextledger.application.kernel.messages import (
        AssistantMessage,
        ToolCallIn,
        ToolResult,
        ToolSchemaIn,
        UserMessage,
    )
    from contextledger.application.rebuild.simulator import Simulation, simulate
    from contextledger.application.render.renderer import Renderer
    from contextledger.application.search.log_search import search_session
    from contextledger.application.summaries.compaction import Compactor
    from contextledger.application.summaries.lineage import SummaryText, compaction_turns, summary_texts
    from contextledger.application.summaries.recall import RecallTool, recall_tool
    from contextledger.application.summaries.summary_worker import SummaryWorker, WorkerSettings
    from contextledger.bootstrap import open_ledger
    from contextledger.domain.content import BlobText, InlineText, Text
    from contextledger.domain.errors import (
        AmbiguousIdError,
        BudgetError,
        ConcurrencyConflictError,
        ConfigError,
        ContextLedgerError,
        DuplicateToolCallError,
        DuplicateToolResultError,
        EncryptionRequiredError,
        EventDecodeError,
        IdempotencyKeyReusedError,
        InjectionOverflowError,
        InvalidMessageError,
        LedgerKeyError,
        LedgerNotFoundError,
        OutputPathError,
        PinnedOverBudgetError,
        ProjectionConfigError,
        ProjectionLockedError,
        ReplayMismatchError,
        SessionExistsError,
        SessionForgottenError,
        SessionNotFoundError,
        StoreError,
        StoreUnavailableError,
        SummarizerError,
        SummarizerUnavailableError,
        SummaryInputTooLargeError,
        SummaryRejectedError,
        TokenizerError,
        TranscriptImportError,
        UnknownToolCallError,
        ValidationError,
    )
    from contextledger.domain.events import (
        AssistantMessageAdded,
        CompactionRequested,
        ItemPinned,
        ItemUnpinned,
        ModelCallRecorded,
        Recorded,
        SessionForgotten,
        SessionStarted,
        SummaryRecorded,
        ToolCall,
        ToolResultRecorded,
        ToolSchema,
        UserMessageAdded,
    )
    from contextledger.domain.ports import SessionInfo
    from contextledger.projections.budget import Budget
    from contextledger.projections.context import Decision, RenderedContext, RenderedMessage, RenderedToolCall
    from contextledger.projections.injection import InjectionHook, StaticInjection
    from contextledger.projections.policy import Policy
    from contextledger.projections.presets import PRESETS, get_preset, preset_names
    from contextledger.projections.provider_cache import ProviderCache, provider_cache

_LAZY: dict[str, str] = {
    "to_anthropic": "contextledger.adapters.formats.anthropic",
    "to_openai": "contextledger.adapters.formats.openai",
    "import_file": "contextledger.adapters.importers.service",
    "import_files": "contextledger.adapters.importers.service",
    "load_policy_file": "contextledger.adapters.policy_files",
    "resolve_policy": "contextledger.adapters.policy_files",
    "Ledger": "contextledger.application.kernel.ledger",
    "AssistantMessage": "contextledger.application.kernel.messages",
    "ToolCallIn": "contextledger.application.kernel.messages",
    "ToolResult": "contextledger.application.kernel.messages",
    "ToolSchemaIn": "contextledger.application.kernel.messages",
    "UserMessage": "contextledger.application.kernel.messages",
    "Renderer": "contextledger.application.render.renderer",
    "open_ledger": "contextledger.bootstrap",
    "BlobText": "contextledger.domain.content",
    "InlineText": "contextledger.domain.content",
    "Text": "contextledger.domain.content",
    "BudgetError": "contextledger.domain.errors",
    "ConcurrencyConflictError": "contextledger.domain.errors",
    "ConfigError": "contextledger.domain.errors",
    "ContextLedgerError": "contextledger.domain.errors",
    "AmbiguousIdError": "contextledger.domain.errors",
    "DuplicateToolCallError": "contextledger.domain.errors",
    "DuplicateToolResultError": "contextledger.domain.errors",
    "EncryptionRequiredError": "contextledger.domain.errors",
    "EventDecodeError": "contextledger.domain.errors",
    "IdempotencyKeyReusedError": "contextledger.domain.errors",
    "InjectionOverflowError": "contextledger.domain.errors",
    "InvalidMessageError": "contextledger.domain.errors",
    "LedgerKeyError": "contextledger.domain.errors",
    "LedgerNotFoundError": "contextledger.domain.errors",
    "OutputPathError": "contextledger.domain.errors",
    "PinnedOverBudgetError": "contextledger.domain.errors",
    "ProjectionConfigError": "contextledger.domain.errors",
    "ProjectionLockedError": "contextledger.domain.errors",
    "SessionExistsError": "contextledger.domain.errors",
    "SessionForgottenError": "contextledger.domain.errors",
    "SessionNotFoundError": "contextledger.domain.errors",
    "StoreError": "contextledger.domain.errors",
    "StoreUnavailableError": "contextledger.domain.errors",
    "SummarizerError": "contextledger.domain.errors",
    "SummarizerUnavailableError": "contextledger.domain.errors",
    "SummaryInputTooLargeError": "contextledger.domain.errors",
    "SummaryRejectedError": "contextledger.domain.errors",
    "TokenizerError": "contextledger.domain.errors",
    "TranscriptImportError": "contextledger.domain.errors",
    "UnknownToolCallError": "contextledger.domain.errors",
    "ValidationError": "contextledger.domain.errors",
    "AssistantMessageAdded": "contextledger.domain.events",
    "ItemPinned": "contextledger.domain.events",
    "ItemUnpinned": "contextledger.domain.events",
    "Recorded": "contextledger.domain.events",
    "SessionForgotten": "contextledger.domain.events",
    "SessionStarted": "contextledger.domain.events",
    "SummaryRecorded": "contextledger.domain.events",
    "ToolCall": "contextledger.domain.events",
    "ToolResultRecorded": "contextledger.domain.events",
    "ToolSchema": "contextledger.domain.events",
    "UserMessageAdded": "contextledger.domain.events",
    "SessionInfo": "contextledger.domain.ports",
    "Budget": "contextledger.projections.budget",
    "Decision": "contextledger.projections.context",
    "RenderedContext": "contextledger.projections.context",
    "RenderedMessage": "contextledger.projections.context",
    "RenderedToolCall": "contextledger.projections.context",
    "InjectionHook": "contextledger.projections.injection",
    "StaticInjection": "contextledger.projections.injection",
    "Policy": "contextledger.projections.policy",
    "PRESETS": "contextledger.projections.presets",
    "get_preset": "contextledger.projections.presets",
    "preset_names": "contextledger.projections.presets",
    "ReplayMismatchError": "contextledger.domain.errors",
    "CompactionRequested": "contextledger.domain.events",
    "ModelCallRecorded": "contextledger.domain.events",
    "Compactor": "contextledger.application.summaries.compaction",
    "SummaryWorker": "contextledger.application.summaries.summary_worker",
    "WorkerSettings": "contextledger.application.summaries.summary_worker",
    "CallRecorder": "contextledger.application.audit.call_recorder",
    "why": "contextledger.application.audit.forensics",
    "WhyAnswer": "contextledger.application.audit.why_answer",
    "compaction_turns": "contextledger.application.summaries.lineage",
    "summary_texts": "contextledger.application.summaries.lineage",
    "SummaryText": "contextledger.application.summaries.lineage",
    "search_session": "contextledger.application.search.log_search",
    "Simulation": "contextledger.application.rebuild.simulator",
    "simulate": "contextledger.application.rebuild.simulator",
    "ProviderCache": "contextledger.projections.provider_cache",
    "provider_cache": "contextledger.projections.provider_cache",
    "ExtractiveSummarizer": "contextledger.adapters.summarizers.extractive",
    "OpenAICompatibleSummarizer": "contextledger.adapters.summarizers.models",
    "AnthropicSummarizer": "contextledger.adapters.summarizers.models",
    "make_summarizer": "contextledger.adapters.summarizers.factory",
    "anthropic_call_ids": "contextledger.adapters.formats.anthropic",
    "to_openai_responses": "contextledger.adapters.formats.openai_responses",
    "AgentContext": "contextledger.adapters.providers.agent",
    "AsyncAgentContext": "contextledger.adapters.providers.agent",
    "AgentRequest": "contextledger.application.agent.agent_types",
    "ToolCallRequest": "contextledger.application.agent.agent_types",
    "RecallTool": "contextledger.application.summaries.recall",
    "recall_tool": "contextledger.application.summaries.recall",
    "fork_session": "contextledger.application.kernel.fork",
    "Follower": "contextledger.application.agent.follower",
    "FollowReport": "contextledger.application.agent.follower",
    "EventsourcingUpstream": "contextledger.adapters.follow.eventsourcing_upstream",
    "replay_call": "contextledger.adapters.providers.replay",
    "ReplayedPayload": "contextledger.adapters.providers.replay",
}
"""Each public name and the module that defines it; the module is imported on first access."""

__all__ = [
    "PRESETS",
    "AgentContext",
    "AgentRequest",
    "AmbiguousIdError",
    "AnthropicSummarizer",
    "AssistantMessage",
    "AssistantMessageAdded",
    "AsyncAgentContext",
    "BlobText",
    "Budget",
    "BudgetError",
    "CallRecorder",
    "CompactionRequested",
    "Compactor",
    "ConcurrencyConflictError",
    "ConfigError",
    "ContextLedgerError",
    "Decision",
    "DuplicateToolCallError",
    "DuplicateToolResultError",
    "EncryptionRequiredError",
    "EventDecodeError",
    "EventsourcingUpstream",
    "ExtractiveSummarizer",
    "FollowReport",
    "Follower",
    "IdempotencyKeyReusedError",
    "InjectionHook",
    "InjectionOverflowError",
    "InlineText",
    "InvalidMessageError",
    "ItemPinned",
    "ItemUnpinned",
    "Ledger",
    "LedgerKeyError",
    "LedgerNotFoundError",
    "ModelCallRecorded",
    "OpenAICompatibleSummarizer",
    "OutputPathError",
    "PinnedOverBudgetError",
    "Policy",
    "ProjectionConfigError",
    "ProjectionLockedError",
    "ProviderCache",
    "RecallTool",
    "Recorded",
    "RenderedContext",
    "RenderedMessage",
    "RenderedToolCall",
    "Renderer",
    "ReplayMismatchError",
    "ReplayedPayload",
    "SessionExistsError",
    "SessionForgotten",
    "SessionForgottenError",
    "SessionInfo",
    "SessionNotFoundError",
    "SessionStarted",
    "Simulation",
    "StaticInjection",
    "StoreError",
    "StoreUnavailableError",
    "SummarizerError",
    "SummarizerUnavailableError",
    "SummaryInputTooLargeError",
    "SummaryRecorded",
    "SummaryRejectedError",
    "SummaryText",
    "SummaryWorker",
    "Text",
    "TokenizerError",
    "ToolCall",
    "ToolCallIn",
    "ToolCallRequest",
    "ToolResult",
    "ToolResultRecorded",
    "ToolSchema",
    "ToolSchemaIn",
    "TranscriptImportError",
    "UnknownToolCallError",
    "UserMessage",
    "UserMessageAdded",
    "ValidationError",
    "WhyAnswer",
    "WorkerSettings",
    "anthropic_call_ids",
    "compaction_turns",
    "fork_session",
    "get_preset",
    "import_file",
    "import_files",
    "load_policy_file",
    "make_summarizer",
    "open_ledger",
    "preset_names",
    "provider_cache",
    "recall_tool",
    "replay_call",
    "resolve_policy",
    "search_session",
    "simulate",
    "summary_texts",
    "to_anthropic",
    "to_openai",
    "to_openai_responses",
    "why",
]


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first access and keep it in the package namespace."""
    module = _LAZY.get(name)
    if module is None:
        msg = f"module 'contextledger' has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
