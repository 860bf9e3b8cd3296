"""The inspector's data: what one self-contained report embeds, call by call (texts stored once)."""

from __future__ import annotations

import msgspec
from contextledger.domain.events import DispositionRun

__all__ = ["CATEGORIES", "Block", "CallData", "CallDiff", "EventData", "ReportData", "SummaryData"]

CATEGORIES = ("system", "tools", "state", "summary", "history", "stub", "truncated", "injected")
"""The tiers of a call's stacked bar, bottom first (free space and the reserve are drawn above them)."""


class Block(msgspec.Struct, frozen=True, array_like=True):
    """One block sent in a call: tier, role, text id, tokens, source positions, rule, reducer, cache status.

    ``cache`` is ``read`` (served from the provider's prompt cache), ``written`` (written to it) or ``""``.
    """

    category: str
    role: str
    text: int
    tokens: int
    first: int
    last: int
    rule: str
    reducer: str
    cache: str
    search: int = -1
    """The text id the page searches besides ``text``: call argument values unescaped (-1: none).

    ``text`` shows a call's arguments as their JSON was sent, where a quote is ``\\"``: a text the model
    read in them is searched in their values, as ``why`` and the event texts read them (ADR 0086)."""


class EventData(msgspec.Struct, frozen=True, array_like=True):
    """One logged event: position, type, role or tool name, text id, time (ISO) or ``""``."""

    position: int
    type: str
    label: str
    text: int
    at: str


class CallDiff(msgspec.Struct, frozen=True, kw_only=True):
    """What changed from the previous call: common prefix, first differing block, blocks and fates, cost."""

    common_tokens: int
    first_different: int
    """Index of this call's first block that the previous call did not send there (-1: identical calls)."""
    added: tuple[int, ...]
    """Indices of this call's blocks that the previous call did not send."""
    removed: tuple[int, ...]
    """Indices of the previous call's blocks this call no longer sends."""
    stubbed: tuple[int, ...]
    summarized: tuple[int, ...]
    dropped: tuple[int, ...]
    truncated: tuple[int, ...]
    cost_delta: float


class CallData(msgspec.Struct, frozen=True, kw_only=True):
    """One model call: its tiers against the budget and window, cache figures, blocks, fates and diff."""

    number: int
    call_id: str
    position: int
    at: str
    policy: str
    policy_hash: str
    budget: int
    window: int
    tokens: int
    tiers: dict[str, int]
    cached: int
    written: int
    cost: float
    uncached_cost: int
    prefix_break: bool
    cache_expired: bool
    compaction: bool
    summary_applied: bool
    summary_id: str | None
    blocks: tuple[Block, ...]
    runs: tuple[DispositionRun, ...]
    diff: CallDiff | None
    usage: dict[str, int | float | str | None] | None = None
    replay_matches: bool | None = None
    """For a recorded call: whether rendering it again gives the recorded context (None when computed)."""
    failure: str | None = None
    """For a recorded call marked failed (``report_failure``): the error; the model never completed it."""


class SummaryData(msgspec.Struct, frozen=True, kw_only=True):
    """A summary artifact: coverage, text id, model, prompt hash, fidelity, status and lineage."""

    summary_id: str
    covers_from: int
    covers_through: int
    new_from: int
    produced_at: int
    text: int
    model: str | None
    summarizer: str | None
    prompt_sha: str | None
    round: int
    parent: str | None
    trigger: str | None
    tokens: int | None
    tokens_before: int | None
    tokens_after: int | None
    fidelity: dict[str, object] | None
    status: str
    used_in: tuple[int, ...]
    """First and last call number that sent it (empty when no call did)."""


class ReportData(msgspec.Struct, frozen=True, kw_only=True):
    """Everything the inspector page shows; ``texts`` holds each distinct text once, referred to by index."""

    session_id: str
    source: str
    """``recorded`` audit records, or ``computed`` with ``policy`` (an imported session)."""
    policy: str
    provider: str
    ttl_seconds: float
    tokenizer: str
    generated_at: str
    texts: list[str]
    events: list[EventData]
    calls: list[CallData]
    summaries: list[SummaryData]
    compare_policy: str | None = None
    compare: list[CallData] | None = None
