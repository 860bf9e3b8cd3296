"""contextledger: the context layer of LLM agents, event-sourced.

``import contextledger`` is the whole public API: open a ledger, append sessions, read them back,
import transcripts, and render the token-budgeted context to send (OpenAI or Anthropic payloads).
"""

from __future__ import annotations

from contextledger.adapters.formats.anthropic import to_anthropic
from contextledger.adapters.formats.openai import to_openai
from contextledger.adapters.importers.service import import_file, import_files
from contextledger.adapters.policy_files import load_policy_file, resolve_policy
from contextledger.application.ledger import Ledger
from contextledger.application.messages import (
    AssistantMessage,
    ToolCallIn,
    ToolResult,
    ToolSchemaIn,
    UserMessage,
)
from contextledger.application.renderer import Renderer
from contextledger.bootstrap import open_ledger
from contextledger.domain.content import BlobText, InlineText, Text
from contextledger.domain.errors import (
    BudgetError,
    ConcurrencyConflictError,
    ConfigError,
    ContextLedgerError,
    DuplicateToolCallError,
    DuplicateToolResultError,
    EventDecodeError,
    InjectionOverflowError,
    InvalidMessageError,
    PinnedOverBudgetError,
    SessionExistsError,
    SessionNotFoundError,
    StoreError,
    StoreUnavailableError,
    TokenizerError,
    TranscriptImportError,
    UnknownToolCallError,
    ValidationError,
)
from contextledger.domain.events import (
    AssistantMessageAdded,
    ItemPinned,
    ItemUnpinned,
    Recorded,
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

__all__ = [
    "PRESETS",
    "AssistantMessage",
    "AssistantMessageAdded",
    "BlobText",
    "Budget",
    "BudgetError",
    "ConcurrencyConflictError",
    "ConfigError",
    "ContextLedgerError",
    "Decision",
    "DuplicateToolCallError",
    "DuplicateToolResultError",
    "EventDecodeError",
    "InjectionHook",
    "InjectionOverflowError",
    "InlineText",
    "InvalidMessageError",
    "ItemPinned",
    "ItemUnpinned",
    "Ledger",
    "PinnedOverBudgetError",
    "Policy",
    "Recorded",
    "RenderedContext",
    "RenderedMessage",
    "RenderedToolCall",
    "Renderer",
    "SessionExistsError",
    "SessionInfo",
    "SessionNotFoundError",
    "SessionStarted",
    "StaticInjection",
    "StoreError",
    "StoreUnavailableError",
    "SummaryRecorded",
    "Text",
    "TokenizerError",
    "ToolCall",
    "ToolCallIn",
    "ToolResult",
    "ToolResultRecorded",
    "ToolSchema",
    "ToolSchemaIn",
    "TranscriptImportError",
    "UnknownToolCallError",
    "UserMessage",
    "UserMessageAdded",
    "ValidationError",
    "get_preset",
    "import_file",
    "import_files",
    "load_policy_file",
    "open_ledger",
    "preset_names",
    "resolve_policy",
    "to_anthropic",
    "to_openai",
]


def __dir__() -> list[str]:
    return __all__
