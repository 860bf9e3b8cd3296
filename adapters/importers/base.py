"""Session drafts, call bookkeeping and per-session reports shared by every transcript importer."""

from __future__ import annotations

import hashlib
import re
import sys
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import msgspec
import pydantic
from contextledger.application.kernel.media_shapes import ledger_media
from contextledger.application.kernel.messages import (
    AssistantMessage,
    MediaIn,
    ToolResult,
    UserMessage,
    parse_message,
)
from contextledger.application.kernel.wire_shapes import HOSTED_ITEMS, THINKING_BLOCKS
from contextledger.domain.errors import (
    DuplicateToolCallError,
    DuplicateToolResultError,
    InvalidMessageError,
    TranscriptImportError,
    UnknownToolCallError,
    ValidationError,
)
from contextledger.domain.events import TIME_KEY, TIME_UNKNOWN
from contextledger.domain.session import CallPairing

__all__ = [
    "CallBook",
    "ImportReport",
    "PreparedSession",
    "SessionDraft",
    "aware_time",
    "media_part",
    "prepare",
    "small_fields",
]

_SLUG = re.compile(r"[^A-Za-z0-9._-]+")
_Message = UserMessage | AssistantMessage | ToolResult


@dataclass
class SessionDraft:
    """One source session parsed into ledger message dicts, before anything is written.

    ``native_id`` is the session's identity inside its source (a Claude Code ``sessionId``, a
    SWE-bench instance id, a tau-bench task and trial); with the content hash it makes the
    deterministic session id. ``notes`` lists what the format could not express or what the
    importer had to decide; they are stored in the session metadata and printed in the report.
    ``source_messages`` counts the source's conversational records the way PROVENANCE.md does.
    """

    source_format: str
    source: str
    native_id: str
    source_ref: str = ""
    system_prompt: str = ""
    model: str | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    messages: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    started_at: datetime | None = None
    source_messages: int = 0
    media_only: set[int] = field(default_factory=set)
    """Indices of user messages kept for their images or files alone: imports before media kept none of
    them, so the digest (the session's id) leaves them out, as it leaves out every message's ``media``."""

    def note(self, text: str) -> None:
        """Record one loss or decision, once."""
        if text not in self.notes:
            self.notes.append(text)

    def last_assistant(self) -> dict[str, Any] | None:
        """Return the most recent message if it is an assistant message, else None."""
        if self.messages and self.messages[-1]["role"] == "assistant":
            return self.messages[-1]
        return None


class ImportReport(msgspec.Struct, kw_only=True):
    """What happened to one source session: where it came from, what was stored, what was lost."""

    session_id: str | None
    format: str
    source: str
    source_ref: str = ""
    status: str
    messages: int = 0
    user_messages: int = 0
    assistant_messages: int = 0
    tool_calls: int = 0
    tool_results: int = 0
    unpaired_calls: int = 0
    source_messages: int = 0
    notes: list[str] = []
    error: str | None = None


@dataclass
class PreparedSession:
    """A validated draft with its deterministic id, idempotency key and counts; ready to write."""

    draft: SessionDraft
    session_id: str
    idempotency_key: str
    messages: list[UserMessage | AssistantMessage | ToolResult]
    report: ImportReport


class CallBook:
    """The tool calls of a source session as an importer meets them, paired by the domain's rule.

    Ids are kept exactly as the source gave them: a provider may reuse an id once its call is
    answered (gpt-4o does), and the ledger accepts that (``CallPairing``). A missing id becomes
    ``call_<n>``. A result pairs with the call of its id awaiting a result (``resolve``); one that
    cannot pair is for the importer to drop and report. An id reused while its earlier call still
    awaits a result is recorded as given and refused by ``prepare``, with its place in the source.
    """

    def __init__(self) -> None:
        """Start with no calls issued."""
        self.pairing = CallPairing()
        self.synthesized = 0

    def issue(self, source_id: str | None, name: str) -> str:
        """Return the ledger id of a new call with ``source_id`` (None: synthesize one)."""
        if not source_id:
            source_id = self._synthesized_id()
        try:
            self.pairing.issue([(source_id, name)])
        except DuplicateToolCallError:
            self.pairing.names[source_id] = name  # prepare() refuses the draft, naming where
        return source_id

    def _synthesized_id(self) -> str:
        """Return the next ``call_<n>`` that no call of the source used."""
        while True:
            self.synthesized += 1
            call_id = f"call_{self.synthesized}"
            if not self.pairing.was_issued(call_id):
                return call_id

    def resolve(self, source_id: str) -> str | None:
        """Return the ledger id a result for ``source_id`` answers, or None if no call awaits it."""
        if not self.pairing.awaits(source_id):
            return None
        self.pairing.answer(source_id)
        return source_id

    def was_issued(self, source_id: str) -> bool:
        """Return True when some call (answered or not) used ``source_id``."""
        return self.pairing.was_issued(source_id)

    def name_of(self, call_id: str) -> str:
        """Return the tool name of the latest call with ``call_id`` (empty if none was issued)."""
        return self.pairing.name_of(call_id) or ""

    @property
    def pending(self) -> list[str]:
        """Ids of calls without a result, in issue order."""
        return self.pairing.pending_calls


def aware_time(value: str | None) -> datetime | None:
    """Parse an ISO-8601 timestamp that names its zone; return None for absent or zone-less ones."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def small_fields(values: dict[str, Any], limit: int = 2000) -> dict[str, Any]:
    """Return the entries of ``values`` whose JSON encoding is at most ``limit`` bytes."""
    kept: dict[str, Any] = {}
    for key, value in values.items():
        try:
            size = len(msgspec.json.encode(value))
        except (TypeError, msgspec.EncodeError):
            continue
        if size <= limit:
            kept[key] = value
    return kept


def media_part(part: dict[str, Any], offset: int, draft: SessionDraft) -> dict[str, Any] | None:
    """Return an image or file part of a user message as the ledger's media dict at ``offset``.

    Any provider's part shape is read (``media_shapes``); a part the append API would refuse (no data,
    an unknown source) is dropped with a note rather than failing the whole file.
    """
    try:
        media = ledger_media(part, offset)
        MediaIn.model_validate(media)
    except (InvalidMessageError, pydantic.ValidationError):
        kind = part.get("type")
        draft.note(f"malformed user '{kind}' parts (no data, or a source no provider defines) were dropped")
        return None
    return media


def _as_digested(message: dict[str, Any]) -> dict[str, Any]:
    """A message as the digest reads it: as imports before ADR 0088 and before media kept it.

    Imports kept only ``meta.thinking_signatures`` (and dropped redacted blocks); they now keep the blocks
    themselves. They kept no image or file parts, nor server tool blocks; they now keep a user message's
    media and an assistant message's ``meta[HOSTED_ITEMS]``. The digest names a
    session's id and idempotency key, so a transcript imported before is still ``unchanged``, never a
    second session.
    """
    if "media" in message:
        message = {k: v for k, v in message.items() if k != "media"}
    meta = message.get("meta")
    if isinstance(meta, dict) and HOSTED_ITEMS in meta:
        meta = {k: v for k, v in meta.items() if k != HOSTED_ITEMS}
        message = {**message, "meta": meta}
    if not isinstance(meta, dict) or THINKING_BLOCKS not in meta:
        return message
    blocks = [b for b in meta[THINKING_BLOCKS] if isinstance(b, dict) and b.get("type") == "thinking"]
    legacy = {k: v for k, v in meta.items() if k != THINKING_BLOCKS}
    if blocks:
        legacy["thinking_signatures"] = [b.get("signature") for b in blocks]
    return {**message, "meta": legacy}


def _digest(draft: SessionDraft) -> str:
    content = {
        "format": draft.source_format,
        "native_id": draft.native_id,
        "system_prompt": draft.system_prompt,
        "model": draft.model,
        "tools": draft.tools,
        "metadata": draft.metadata,
        "messages": [_as_digested(m) for i, m in enumerate(draft.messages) if i not in draft.media_only],
    }
    return hashlib.sha256(msgspec.json.encode(content, order="deterministic")).hexdigest()


def _check_pairing(draft: SessionDraft, messages: list[UserMessage | AssistantMessage | ToolResult]) -> int:
    """Apply the domain's pairing rule (``CallPairing``) before writing; return the calls left unanswered."""
    pairing = CallPairing(draft.native_id)
    for position, message in enumerate(messages):
        try:
            if isinstance(message, AssistantMessage):
                pairing.issue(((call.id, call.name) for call in message.tool_calls), position)
            elif isinstance(message, ToolResult):
                pairing.answer(message.call_id)
        except ValidationError as error:
            where = str(draft.messages[position].get("meta", {}).get("source_ref", f"message {position}"))
            raise TranscriptImportError(draft.source, where, _pairing_problem(error)) from None
    return len(pairing.pending_calls)


def _pairing_problem(error: ValidationError) -> str:
    """Say which pairing rule a source message breaks, in the source's terms."""
    if isinstance(error, UnknownToolCallError):
        return f"tool result for call {error.call_id!r}, which no earlier assistant message issued"
    if isinstance(error, DuplicateToolResultError):
        return f"second result for call {error.call_id!r}"
    if isinstance(error, DuplicateToolCallError):
        return (
            f"tool call id {error.call_id!r} is issued again while a call with that id awaits its "
            "result (an id may only be reused once its call is answered)"
        )
    return str(error)


def _time_unknown(message: _Message) -> _Message:
    """The message marked as having no recorded time (the ledger then stores none, not the import's)."""
    return message.model_copy(update={"meta": {**message.meta, TIME_KEY: TIME_UNKNOWN}})


def prepare(draft: SessionDraft) -> PreparedSession:
    """Validate a draft as the ledger will, and give it its deterministic id and idempotency key.

    Raises:
        TranscriptImportError: a message does not fit the append API or breaks the pairing rules.
    """
    validated: list[UserMessage | AssistantMessage | ToolResult] = []
    for position, raw in enumerate(draft.messages):
        try:
            validated.append(parse_message(raw))
        except InvalidMessageError as error:
            where = str(raw.get("meta", {}).get("source_ref", f"message {position}"))
            raise TranscriptImportError(draft.source, where, str(error)) from None
    unpaired = _check_pairing(draft, validated)
    digest = _digest(draft)
    untimed = sum(m.at is None for m in validated)
    if untimed:  # after the digest: session ids and idempotency keys stay those of earlier imports
        validated = [_time_unknown(m) if m.at is None else m for m in validated]
        # one string per count, not per session: a file of many small sessions keeps every report
        note = f"{untimed} message(s) carry no time of their own: stored with the time unknown"
        draft.note(sys.intern(note))
    slug = _SLUG.sub("-", draft.native_id).strip("-")[:48]
    session_id = (
        f"{draft.source_format}-{slug}-{digest[:12]}" if slug else f"{draft.source_format}-{digest[:16]}"
    )
    roles = [m.role for m in validated]
    report = ImportReport(
        session_id=session_id,
        format=draft.source_format,
        source=draft.source,
        source_ref=draft.source_ref,
        status="parsed",
        messages=len(validated),
        user_messages=roles.count("user"),
        assistant_messages=roles.count("assistant"),
        tool_calls=sum(len(m.tool_calls) for m in validated if isinstance(m, AssistantMessage)),
        tool_results=roles.count("tool"),
        unpaired_calls=unpaired,
        source_messages=draft.source_messages,
        notes=list(draft.notes),
    )
    return PreparedSession(draft, session_id, f"import:{digest}", validated, report)
