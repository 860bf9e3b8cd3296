"""Domain events of a session's stream: immutable, tagged msgspec Structs with stable topics."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar, Literal, get_args

import msgspec
from contextledger.domain.content import MediaPart, Text

__all__ = [
    "EVENT_TYPES",
    "NOT_THE_USERS_WORDS",
    "TIME_KEY",
    "TIME_UNKNOWN",
    "AnyEvent",
    "AssistantMessageAdded",
    "CompactionRequested",
    "CompactionTrigger",
    "ContextOverflowReported",
    "Disposition",
    "DispositionRun",
    "Fidelity",
    "ForkParent",
    "ItemPinned",
    "ItemUnpinned",
    "LedgerEvent",
    "ModelCallFailed",
    "ModelCallRecorded",
    "ModelCallUsageReported",
    "PolicyRegistered",
    "Recorded",
    "SessionForgotten",
    "SessionStarted",
    "SummaryAttemptFailed",
    "SummaryAttemptStarted",
    "SummaryLeaseRenewed",
    "SummaryRecorded",
    "TokenTiers",
    "ToolCall",
    "ToolResultRecorded",
    "ToolSchema",
    "UserMessageAdded",
    "said_by_user",
    "topic_of",
]


class ToolSchema(msgspec.Struct, frozen=True, kw_only=True):
    """A tool the model may call: name, description and JSON-schema parameters.

    ``strict`` is the provider's strict-schema flag as the caller sent it (OpenAI function tools,
    Anthropic tools); unset when the tool did not carry one, and then absent from the encoded
    event, so events and payloads of tools without it are unchanged.
    """

    name: str
    description: str = ""
    parameters: dict[str, Any] = {}
    strict: bool | msgspec.UnsetType = msgspec.UNSET


class ToolCall(msgspec.Struct, frozen=True, kw_only=True):
    """One tool call of an assistant message; ``arguments`` is the JSON text the model produced."""

    id: str
    name: str
    arguments: str = "{}"


class ForkParent(msgspec.Struct, frozen=True, kw_only=True):
    """The session and position a forked session continues from."""

    session_id: str
    position: int


TIME_KEY = "time"
"""``meta[TIME_KEY]`` says how an event's ``at`` was obtained when its source recorded no time of its own:
``TIME_UNKNOWN`` (``at`` is None: nothing says when it happened; never the time of an import), or
``"derived: <from what>"``. Events without the key carry the time their caller gave (or the clock's)."""

TIME_UNKNOWN = "unknown"


class LedgerEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    """Base of every domain event.

    ``at`` is the time the caller says the event happened (the domain never reads a clock);
    ``meta`` carries provenance such as the source format and record id of an import.
    The tag (class name) plus ``VERSION`` make the stored topic; renaming a class must keep its tag.
    """

    VERSION: ClassVar[int] = 1

    at: datetime | None = None
    meta: dict[str, Any] = {}


class SessionStarted(LedgerEvent, frozen=True, kw_only=True, tag="SessionStarted"):
    """A session began: its system prompt, model, tool schemas, metadata and fork parent."""

    session_id: str
    system_prompt: str = ""
    model: str | None = None
    tools: tuple[ToolSchema, ...] = ()
    metadata: dict[str, Any] = {}
    parent: ForkParent | None = None


class UserMessageAdded(LedgerEvent, frozen=True, kw_only=True, tag="UserMessageAdded"):
    """The user (a human or a simulator) said something: text, and the images and files it showed.

    ``media`` are the message's image and file parts (``domain.content.MediaPart``), in order;
    events logged before parts existed decode with none.
    """

    content: Text
    media: tuple[MediaPart, ...] = ()


NOT_THE_USERS_WORDS = ("is_meta", "is_compact_summary")
"""``meta`` flags of a user message its agent wrote in the user's place, as importers keep them: Claude
Code's ``isMeta`` caveats and slash-command echoes, and the ``isCompactSummary`` summary of a resumption."""


def said_by_user(event: UserMessageAdded) -> bool:
    """Whether the message is the user's own words: no flag of ``NOT_THE_USERS_WORDS`` is set in its ``meta``.

    A message that is not is shown like any other, but is never the task or the latest request kept
    against eviction, and the session-state card never lists it among the user's instructions.
    """
    meta = event.meta
    return not (meta and any(meta.get(flag) is True for flag in NOT_THE_USERS_WORDS))


class AssistantMessageAdded(LedgerEvent, frozen=True, kw_only=True, tag="AssistantMessageAdded"):
    """The model answered: text, optional reasoning, and the tool calls it issued.

    ``reasoning_signature`` is the provider's proof of the reasoning, needed to send it back (the
    ``signature`` of Anthropic ``thinking`` blocks, the ``encrypted_content`` of an OpenAI Responses
    ``reasoning`` item); None when the provider gave none.
    """

    content: Text | None = None
    reasoning: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    model: str | None = None
    reasoning_signature: str | None = None


class ToolResultRecorded(LedgerEvent, frozen=True, kw_only=True, tag="ToolResultRecorded"):
    """The result of one tool call, paired to it by ``call_id``."""

    call_id: str
    tool_name: str
    content: Text
    is_error: bool = False


class ItemPinned(LedgerEvent, frozen=True, kw_only=True, tag="ItemPinned"):
    """The event at ``position`` must never be evicted from the rendered context."""

    position: int
    reason: str = ""


class ItemUnpinned(LedgerEvent, frozen=True, kw_only=True, tag="ItemUnpinned"):
    """An earlier pin of the event at ``position`` is lifted."""

    position: int


class Fidelity(msgspec.Struct, frozen=True, kw_only=True):
    """Which verbatim facts of a summarized span survive in the summary text (fractions, missing ones)."""

    paths: float = 1.0
    commands: float = 1.0
    identifiers: float = 1.0
    numbers: float = 1.0
    overall: float = 1.0
    total: int = 0
    missing: tuple[str, ...] = ()
    constraints: float = 1.0
    """The share of the user's instructions in the span (the session-state card's) the text keeps."""
    todo: float = 1.0
    """The share of the latest todo list's items the text keeps (when the span holds that list)."""
    lost: tuple[str, ...] = ()
    """The instructions and todo items it lost: a summary that lost any is low-fidelity."""


class SummaryRecorded(LedgerEvent, frozen=True, kw_only=True, tag="SummaryRecorded"):
    """A summary artifact covering the session's positions ``covers_from..covers_through``.

    ``produced_at`` is the session position the summary was made after: a render at an earlier
    position never uses it, which keeps renders deterministic. Summaries live in their own stream.
    ``round`` and ``previous_summary_id`` chain recursive summaries (round N integrates round N-1);
    ``producer`` says whether the worker made it for ``request_id`` or a caller recorded it.
    """

    summary_id: str
    session_id: str
    covers_from: int
    covers_through: int
    content: Text
    produced_at: int
    model: str | None = None
    prompt_sha: str | None = None
    config_sha: str | None = None
    request_id: str | None = None
    round: int = 1
    depth: int = 0
    previous_summary_id: str | None = None
    summarizer: str | None = None
    producer: Literal["worker", "api"] | None = None
    tokens: int | None = None
    tokens_before: int | None = None
    tokens_after: int | None = None
    fidelity: Fidelity | None = None
    drafts: int = 1
    """Summarizer calls it took: 2 when the first draft lost what the card holds and was retried."""
    withheld: bool = False
    """Every draft lost what the card holds: recorded with its report, never applied to a context."""


CompactionTrigger = Literal["threshold", "overflow", "manual"]


class CompactionRequested(LedgerEvent, frozen=True, kw_only=True, tag="CompactionRequested"):
    """A durable request to summarize ``covers_from..covers_through`` (compaction started, seed 002).

    Planned when the free reducers leave the context above its high-water mark, or forced by an
    overflow the agent reported, or asked for by hand. ``previous_summary_id`` is the summary in
    force when it was planned: the artifact integrates it, and is stale if another replaced it.
    """

    request_id: str
    session_id: str
    covers_from: int
    covers_through: int
    planned_at: int
    trigger: CompactionTrigger = "threshold"
    round: int = 1
    depth: int = 0
    previous_summary_id: str | None = None
    policy: str = ""
    policy_json: str = ""
    """The requesting policy itself (``Policy.fingerprint``): a worker holds the summary to what that
    policy shows under ``budget``, a policy file's too. Empty in requests planned before it."""
    budget: int = 0
    tokenizer: str = ""
    tokens_before: int = 0
    target_tokens: int = 0
    summarizer: str = ""
    summarizer_config: str = ""


class SummaryAttemptStarted(LedgerEvent, frozen=True, kw_only=True, tag="SummaryAttemptStarted"):
    """A worker took a request; until ``lease_until`` no other worker starts it again."""

    request_id: str
    attempt: int
    worker: str
    lease_until: datetime


class SummaryLeaseRenewed(LedgerEvent, frozen=True, kw_only=True, tag="SummaryLeaseRenewed"):
    """The worker on an attempt is alive (its heartbeat): its lease now runs until ``lease_until``."""

    request_id: str
    attempt: int
    worker: str
    lease_until: datetime


class SummaryAttemptFailed(LedgerEvent, frozen=True, kw_only=True, tag="SummaryAttemptFailed"):
    """An attempt produced no usable summary; the projection is unchanged (compaction ended, failed)."""

    request_id: str
    attempt: int
    worker: str
    error_type: str
    message: str
    retry_after: datetime | None = None
    dead_lettered: bool = False


class ContextOverflowReported(LedgerEvent, frozen=True, kw_only=True, tag="ContextOverflowReported"):
    """The provider refused a request as too long: compaction toward a tighter target is forced."""

    position: int
    limit_tokens: int | None = None
    sent_tokens: int | None = None
    message: str = ""


Disposition = Literal["verbatim", "pinned", "truncated", "stubbed", "summarized", "dropped", "control"]
"""An event's fate in one call; ``control`` is an event with no text of its own (a pin, an unpin)."""


class DispositionRun(msgspec.Struct, frozen=True, array_like=True):
    """Consecutive log positions ``first..last`` that met the same fate, by the same rule, in one call."""

    first: int
    last: int
    disposition: Disposition
    rule: str
    summary_id: str | None = None


class TokenTiers(msgspec.Struct, frozen=True, kw_only=True):
    """Where a call's tokens went; the tiers add up exactly to the rendered total."""

    system: int = 0
    tools: int = 0
    summary: int = 0
    history: int = 0
    tool_results: int = 0
    injected: int = 0

    @property
    def total(self) -> int:
        """The sum of the tiers."""
        return self.system + self.tools + self.summary + self.history + self.tool_results + self.injected


class PolicyRegistered(LedgerEvent, frozen=True, kw_only=True, tag="PolicyRegistered"):
    """The full text of a policy, stored once under its hash, so any recorded call can be rendered again."""

    policy_hash: str
    name: str
    policy_json: str


class ModelCallRecorded(LedgerEvent, frozen=True, kw_only=True, tag="ModelCallRecorded"):
    """A ``model_calls`` audit record: one render handed to a model, and the fate of every event before it.

    ``dispositions`` cover positions 1..``position`` in runs; ``tiers`` add up to ``tokens``;
    ``context_sha`` hashes the rendered context, ``payload_sha`` the wire payload sent
    (``wire_format``), ``prefix_sha`` its stable prefix. Lives in the session's calls stream.
    """

    call_id: str
    session_id: str
    position: int
    policy: str
    policy_hash: str
    budget: int
    tokenizer: str
    tokens: int
    tiers: TokenTiers
    dispositions: tuple[DispositionRun, ...]
    summary_id: str | None = None
    summary_span: tuple[int, int] | None = None
    summary_round: int | None = None
    context_sha: str = ""
    payload_sha: str = ""
    prefix_sha: str = ""
    wire_format: str = "openai"
    stable_prefix: int = 0


class ModelCallUsageReported(LedgerEvent, frozen=True, kw_only=True, tag="ModelCallUsageReported"):
    """What the provider reported for a recorded call: tokens in, cached, out, and the latency."""

    call_id: str
    input_tokens: int | None = None
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None
    output_tokens: int | None = None
    latency_ms: float | None = None
    model: str | None = None


class ModelCallFailed(LedgerEvent, frozen=True, kw_only=True, tag="ModelCallFailed"):
    """A recorded call the model did not complete: the error, and what arrived before it (a cut stream).

    The conversation log is left as it was (the agent retries the call); what arrived is kept here.
    """

    call_id: str
    error: str
    partial_text: str | None = None
    events: int = 0
    """Stream events that arrived before the failure (0 for a call that failed before replying)."""


class SessionForgotten(LedgerEvent, frozen=True, kw_only=True, tag="SessionForgotten"):
    """The tombstone of an erased session: who erased it, when and why (its content is unreadable).

    Appended to the session's own stream when its data key is destroyed; it is sealed under the
    ledger key, so it stays readable while everything before it is not.
    """

    session_id: str
    reason: str
    by: str


AnyEvent = (
    SessionStarted
    | UserMessageAdded
    | AssistantMessageAdded
    | ToolResultRecorded
    | ItemPinned
    | ItemUnpinned
    | SummaryRecorded
    | CompactionRequested
    | SummaryAttemptStarted
    | SummaryLeaseRenewed
    | SummaryAttemptFailed
    | ContextOverflowReported
    | PolicyRegistered
    | ModelCallRecorded
    | ModelCallUsageReported
    | ModelCallFailed
    | SessionForgotten
)
"""Every event type the ledger stores."""

EVENT_TYPES: tuple[type[LedgerEvent], ...] = get_args(AnyEvent)
"""The members of ``AnyEvent``, in order: the one list of event types, derived from the union."""


def topic_of(event_type: type[LedgerEvent]) -> str:
    """Return the stable stored topic of an event type, e.g. ``contextledger/UserMessageAdded/v1``."""
    tag = event_type.__struct_config__.tag
    return f"contextledger/{tag}/v{event_type.VERSION}"


class Recorded(msgspec.Struct, frozen=True, rename={"position": "seq"}):
    """An event with its position (1-based, in its session's stream).

    Encoded, the position keeps its stored name ``seq``: pins carry their step group's events as
    builtins (``ItemPinned.meta["restore"]``), and events already logged must stay readable.
    """

    position: int
    event: AnyEvent
