"""What a summarizer is asked (a span of the log, the previous round, the live prefix) and what it answers."""

from __future__ import annotations

import re
from typing import Literal, Protocol

import msgspec
from contextledger.domain.errors import SummaryRejectedError
from contextledger.domain.events import ToolCall
from contextledger.projections.context import RenderedContext

__all__ = [
    "CLIPPED",
    "SUMMARY_INSTRUCTION",
    "SUMMARY_SYSTEM",
    "SpanEntry",
    "Summarizer",
    "SummaryDraft",
    "SummaryRequest",
    "check_summary_text",
    "clip_text",
    "entry_lines",
    "summary_prompt",
]

SUMMARY_SYSTEM = (
    "You summarize a coding agent's conversation so that it can continue its task from the summary."
)
"""The system message of a model summarizer's request without a live prefix (with one, the agent's stays)."""

SUMMARY_INSTRUCTION = """You are summarizing a coding agent's conversation history.
Your summary replaces the earlier turns listed below, so preserve ALL information needed to continue the task.

Create a summary with these EXACT sections:

## Session Summary (Compaction Round {round})
### Original Task
[the user's original request, verbatim]
### Completed Work
| File/Component | Action | Description |
|----------------|--------|-------------|
### Commands Run
### Key Technical Decisions
### Errors & Resolutions
### Current State
### Pending Work
- [ ] [each remaining item and every open todo item]

Constraints: at most {max_tokens} tokens; exact file paths, commands, identifiers and numbers copied verbatim;
if a previous summary exists, INTEGRATE (do not duplicate) its content.
The "## Session State" block below (and any "[Session state ...]" block in the context above) comes from the
log: keep every user instruction and the current todo list it shows, and never contradict it."""
"""Seed 004's structured template, sent after the live prefix so the summary call reads the provider cache."""

EntryRole = Literal["user", "assistant", "tool", "summary"]


CLIPPED = re.compile(r"\n\[… [\d,]+ characters omitted …\]\n")
"""The mark ``clip_text`` leaves where it cut a long text: the entry's own words never hold it."""


def clip_text(text: str, limit: int) -> str:
    """Return ``text`` cut to its head and tail around a mark (``CLIPPED``) when longer than ``limit``."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[… {len(text) - limit:,} characters omitted …]\n{text[-half:]}"


class SpanEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One logged event of the span to summarize, with its full text resolved."""

    position: int
    role: EntryRole
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_name: str | None = None
    is_error: bool = False


class SummaryRequest(msgspec.Struct, frozen=True, kw_only=True):
    """Summarize positions ``covers_from..covers_through`` of a session, integrating the previous round.

    ``entries`` are only the events newly collapsed (never the raw events an earlier round already
    summarized): round N reads round N-1's text plus the new span. ``prefix`` is the context last
    sent to the model, so a model summarizer can send it unchanged and read the provider's cache.
    """

    session_id: str
    covers_from: int
    covers_through: int
    round: int
    original_task: str
    entries: tuple[SpanEntry, ...]
    previous: str | None = None
    depth: int = 0
    max_tokens: int = 800
    prefix: RenderedContext | None = None
    card: str | None = None
    """The session-state card at the request's point (every user instruction, the latest todo list):
    sent to a model summarizer whether or not there is a live prefix; the summary is checked against it."""
    lost: tuple[str, ...] = ()
    """On a retry: what the previous draft lost of the card (the model is asked to keep it verbatim)."""


class SummaryDraft(msgspec.Struct, frozen=True, kw_only=True):
    """A summarizer's answer: the text, the model that wrote it, the prompt hash and the usage reported."""

    text: str
    model: str | None = None
    prompt_sha: str | None = None
    input_tokens: int | None = None
    cached_tokens: int | None = None
    output_tokens: int | None = None


class Summarizer(Protocol):
    """Turns a ``SummaryRequest`` into a ``SummaryDraft``; raises ``SummarizerError`` subclasses only."""

    @property
    def name(self) -> str:
        """Stable name of the summarizer kind, e.g. ``extractive`` or ``openai-compatible``."""
        ...

    @property
    def config_sha(self) -> str:
        """Hash of everything that changes its output (model, prompt, limits); never includes secrets."""
        ...

    def summarize(self, request: SummaryRequest) -> SummaryDraft:
        """Return the summary of ``request``'s span."""
        ...


def summary_prompt(request: SummaryRequest) -> str:
    """Return what a model summarizer sends after the prefix: the template, previous round and span."""
    lines = [
        SUMMARY_INSTRUCTION.format(round=request.round, max_tokens=request.max_tokens),
        "",
        "## Previous Summary",
        request.previous or "None - this is the first compaction round.",
        "",
        "## Original User Task",
        request.original_task,
        "",
    ]
    if request.card:
        lines += ["## Session State (from the log: keep it, never contradict it)", request.card, ""]
    if request.lost:
        lines += ["## Your previous draft lost these: include each one verbatim", *request.lost, ""]
    lines += [
        f"## Messages to Summarize (log positions {request.covers_from}-{request.covers_through})",
    ]
    for entry in request.entries:
        lines.extend(entry_lines(entry))
    return "\n".join(lines)


def entry_lines(entry: SpanEntry) -> list[str]:
    """The lines of one message of the span in a summary prompt: who said it, its text, its tool calls."""
    lines = [f"[{entry.position}] {entry.role.upper()}{' ' + entry.tool_name if entry.tool_name else ''}:"]
    if entry.text:
        lines.append(entry.text)
    lines.extend(f"[Tool call {c.id}: {c.name}({c.arguments})]" for c in entry.tool_calls)
    return lines


_SKELETON_LINE = re.compile(
    r"^\s*(?:#+ .*|\|[-| ]*\||[-*] \[ \]\s*|[-*]\s*|\[[^\]]*\]|\(none[^)]*\)|_.*_"
    r"|(?:[-*]\s*)?(?:none|n/?a|tbd|nothing|unknown|-+)\.?)?\s*$",
    re.IGNORECASE,
)
"""Lines that carry no content: headings, table rules, empty bullets, ``[placeholders]``, ``(none)``, and a
section's bare ``None``, ``N/A``, ``TBD`` or ``-`` (a model filling the template with nothing)."""


def check_summary_text(text: object) -> str:
    """Return a summary text that has content; raise ``SummaryRejectedError`` for empty or skeleton text.

    A summary replaces history, so one that says nothing must never be applied (peers shipped empty
    template skeletons as summaries).
    """
    if not isinstance(text, str) or not text.strip():
        raise SummaryRejectedError("the summary is empty")
    if all(_SKELETON_LINE.match(line) for line in text.splitlines()):
        raise SummaryRejectedError("the summary is only the template's headings and placeholders")
    return text.strip()
