"""contextledger: the context layer of LLM agents, event-sourced.

``import contextledger`` is the whole public API: open a ledger, append sessions, read them back.
"""

from __future__ import annotations

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
from contextledger.ledger import Ledger
from contextledger.messages import AssistantMessage, ToolCallIn, ToolResult, ToolSchemaIn, UserMessage

__all__ = [
    "AssistantMessage",
    "AssistantMessageAdded",
    "BlobText",
    "BudgetError",
    "ConcurrencyConflictError",
    "ConfigError",
    "ContextLedgerError",
    "DuplicateToolCallError",
    "DuplicateToolResultError",
    "EventDecodeError",
    "InjectionOverflowError",
    "InlineText",
    "InvalidMessageError",
    "ItemPinned",
    "ItemUnpinned",
    "Ledger",
    "PinnedOverBudgetError",
    "Recorded",
    "SessionExistsError",
    "SessionInfo",
    "SessionNotFoundError",
    "SessionStarted",
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
    "open_ledger",
]


def __dir__() -> list[str]:
    return __all__
