"""The incremental render state: the current window of step groups and the running token sums."""

from __future__ import annotations

import msgspec
from contextledger.domain.content import MediaPart, Text
from contextledger.domain.events import ToolSchema
from contextledger.projections.card_state import CardState
from contextledger.projections.context import DecisionAction, MessageKind, RenderedToolCall, Role

__all__ = ["Entry", "Group", "PendingCall", "Removed", "RenderState", "SummaryRef", "WorkingContext"]


class Entry(msgspec.Struct, frozen=True, kw_only=True, array_like=True):
    """One message of the window as it renders now.

    ``text`` (a stub or a truncation) replaces ``content`` when set. ``tokens`` is the rendered size
    including overheads; ``full_tokens`` the size of the logged message, for stubs and audits.
    ``short_text``/``short_tokens`` are a truncated form precomputed on arrival and applied at the
    next compaction point. ``rule`` names the rule that gave the entry its current ``kind``.
    """

    position: int
    role: Role
    tokens: int
    kind: MessageKind = "message"
    content: Text | None = None
    text: str | None = None
    tool_calls: tuple[RenderedToolCall, ...] = ()
    tool_call_id: str | None = None
    tool_name: str | None = None
    is_error: bool = False
    full_tokens: int = 0
    short_text: str | None = None
    short_tokens: int = 0
    rule: str = ""
    media: tuple[MediaPart, ...] = ()
    """Image and file parts rendered with the message (counted in ``tokens``)."""
    media_note: str | None = None
    """The stubs of evicted parts (``projections.media.media_note``), rendered after the text."""

    @property
    def is_result(self) -> bool:
        """True for a tool result (stubbable, counted in the tool-result tier)."""
        return self.role == "tool"


class PendingCall(msgspec.Struct, frozen=True, array_like=True):
    """A tool call of a group still waiting for its result (rendered as a placeholder result)."""

    call_id: str
    tool_name: str


class Group(msgspec.Struct, frozen=True, kw_only=True, array_like=True):
    """A step group: one assistant message with all its tool results, or one user message.

    Groups are atomic: they are kept, summarized or dropped whole, so a call never loses its result.
    ``turn`` and ``step`` are the session's user-turn and assistant-step counters when the group began.
    """

    start: int
    turn: int
    step: int
    entries: tuple[Entry, ...]
    pending: tuple[PendingCall, ...] = ()
    tokens: int = 0
    tool_tokens: int = 0
    head: bool = False

    @property
    def is_user(self) -> bool:
        """True for a lone user message."""
        return self.entries[0].role == "user"

    @property
    def messages(self) -> int:
        """How many messages the group renders (placeholders included)."""
        return len(self.entries) + len(self.pending)


class Removed(msgspec.Struct, frozen=True, kw_only=True, array_like=True):
    """A coalesced range of evicted positions, turned into a ``Decision`` when rendering."""

    first: int
    last: int
    action: DecisionAction
    rule: str
    messages: int
    tokens: int


class SummaryRef(msgspec.Struct, frozen=True, kw_only=True, array_like=True):
    """A summary artifact available to the fold: its span, its content and its rendered size."""

    summary_id: str
    covers_from: int
    covers_through: int
    produced_at: int
    content: Text
    tokens: int


class WorkingContext(msgspec.Struct, kw_only=True, array_like=True):
    """The working context reducers operate on: the summaries shown and the groups kept, in order.

    ``index`` maps a group's start position to its place in ``groups``; ``tokens`` and
    ``tool_tokens`` are running sums over the summaries, the card and the groups. ``removed`` holds the
    decisions of everything evicted so far (ranges, coalesced).
    """

    groups: list[Group] = msgspec.field(default_factory=list)
    index: dict[int, int] = msgspec.field(default_factory=dict)
    summaries: tuple[SummaryRef, ...] = ()
    tokens: int = 0
    tool_tokens: int = 0
    removed: list[Removed] = msgspec.field(default_factory=list)
    card: str = ""
    """The session-state card's text as it renders now (``projections.card``); its size is in ``tokens``."""
    card_tokens: int = 0
    card_after: int = 0
    """The card renders after the leading user messages (and head) that start at or before this position.

    Set when the card is refreshed (a compaction point), so the card's place never moves between them.
    """

    def copy(self) -> WorkingContext:
        """Return an independent copy (groups are immutable, so containers are copied shallowly)."""
        return WorkingContext(
            groups=list(self.groups),
            index=dict(self.index),
            summaries=self.summaries,
            tokens=self.tokens,
            tool_tokens=self.tool_tokens,
            removed=list(self.removed),
            card=self.card,
            card_tokens=self.card_tokens,
            card_after=self.card_after,
        )


class RenderState(msgspec.Struct, kw_only=True, array_like=True):
    """Everything the fold keeps between events; ``render`` reads only this.

    Ownership: ``Projector.evolve`` mutates the state it is given and returns it. Take
    ``state.copy()`` (O(window)) or encode it with msgspec to keep a snapshot. ``reason`` is set
    only while a compaction runs (``tokens``, ``tool_tier`` or ``summary``) so reducers know why.
    """

    session_id: str = ""
    position: int = 0
    system: str = ""
    system_tokens: int = 0
    tools: tuple[ToolSchema, ...] = ()
    tools_tokens: int = 0
    turns: int = 0
    steps: int = 0
    first_user: int | None = None
    latest_user: int | None = None
    head_open: bool = True
    head_tokens: int = 0
    head_end: int = 0
    window: WorkingContext = msgspec.field(default_factory=WorkingContext)
    owners: dict[str, int] = msgspec.field(default_factory=dict)
    pins: dict[int, int] = msgspec.field(default_factory=dict)
    restored: dict[int, Entry | None] = msgspec.field(default_factory=dict)
    """Positions a pin brought back: the entry's form before (None: its group had been evicted)."""
    available: list[SummaryRef] = msgspec.field(default_factory=list)
    compactions: int = 0
    after_compaction: int = 0
    after_tool: int = 0
    pending_tokens: int = 0
    reason: str = ""
    last_at: float | None = None
    """Latest conversation timestamp seen (POSIX seconds), kept only for cache-aware compaction."""
    card: CardState = msgspec.field(default_factory=CardState)
    """What the session-state card is built from (``projections.card_state``)."""
    request_from: int | None = None
    """The first user message of the current request, when the policy pins it whole (``pin_whole_request``):
    the user's messages since the assistant's last reply, up to ``latest_user``."""
    request_steps: int = 0
    """``steps`` when the current request began: a later user message with no step since extends it."""
    request_tokens: int = 0
    """Tokens of the current request's messages from ``request_from`` (at most one message's cap)."""

    @property
    def total(self) -> int:
        """Tokens of the context as it renders now (system, tools, summaries, groups)."""
        return self.system_tokens + self.tools_tokens + self.window.tokens

    def copy(self) -> RenderState:
        """Return an independent snapshot of the state, O(window)."""
        return RenderState(
            session_id=self.session_id,
            position=self.position,
            system=self.system,
            system_tokens=self.system_tokens,
            tools=self.tools,
            tools_tokens=self.tools_tokens,
            turns=self.turns,
            steps=self.steps,
            first_user=self.first_user,
            latest_user=self.latest_user,
            head_open=self.head_open,
            head_tokens=self.head_tokens,
            head_end=self.head_end,
            window=self.window.copy(),
            owners=dict(self.owners),
            pins=dict(self.pins),
            restored=dict(self.restored),
            available=list(self.available),
            compactions=self.compactions,
            after_compaction=self.after_compaction,
            after_tool=self.after_tool,
            pending_tokens=self.pending_tokens,
            reason=self.reason,
            last_at=self.last_at,
            card=self.card.copy(),
            request_from=self.request_from,
            request_steps=self.request_steps,
            request_tokens=self.request_tokens,
        )
