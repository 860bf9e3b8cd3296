"""The default summarizer: offline, deterministic, extractive, filling seed 004's structured template."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

import msgspec
from contextledger.domain.content import content_address
from contextledger.domain.ports import TokenCounter
from contextledger.projections.card_state import checklist_of, says_failed, todo_items
from contextledger.projections.fidelity import command_of, facts_of
from contextledger.projections.shell_files import files_of_call
from contextledger.projections.summary_requests import SpanEntry, SummaryDraft, SummaryRequest
from contextledger.projections.wire import arguments_object

__all__ = ["CHARS_PER_TOKEN", "ExtractiveSummarizer"]

CHARS_PER_TOKEN = 2.5
"""Characters allowed per token of ``max_tokens``: below cl100k's ratio on code and prose, so text fits."""

_SECTIONS = (
    "Original Task",
    "Completed Work",
    "Commands Run",
    "Key Technical Decisions",
    "Errors & Resolutions",
    "Current State",
    "Pending Work",
    "Key Facts",
)
_TABLE_HEAD = ("| File/Component | Action | Description |", "|----------------|--------|-------------|")
_DECISION = re.compile(
    r"\b(?:I'll|I will|I'm going to|let's|we'll|decided|instead|switch(?:ed)? to|use|using|chose|"
    r"because|the fix|the cause|root cause)\b",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_TODO_LINE = re.compile(r"\bTODO:\s+(.+)$", re.MULTILINE)
_SCAN_CHARS = 20_000
"""How much of one assistant text is read for decisions."""
_SMALLEST = 3
"""Below one item per list there is nothing left to shrink: the text is cut instead."""
_PLACEHOLDER = re.compile(r"^\((?:none|no )[^)]*\)$")


class _Limits(msgspec.Struct, frozen=True):
    """How many items each section keeps (the newest): the bound that stops growth across rounds."""

    files: int = 25
    commands: int = 15
    decisions: int = 8
    errors: int = 8
    pending: int = 15
    identifiers: int = 40
    numbers: int = 30
    task_chars: int = 2_000
    line_chars: int = 200


def _clip(text: str, limit: int) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def _sections(previous: str | None) -> dict[str, list[str]]:
    """Parse a summary this summarizer wrote into its sections' item lines."""
    found: dict[str, list[str]] = {name: [] for name in _SECTIONS}
    current: str | None = None
    for line in (previous or "").splitlines():
        if line.startswith("### "):
            current = line[4:].strip() if line[4:].strip() in found else None
        elif current and line.strip() and line not in _TABLE_HEAD and not _PLACEHOLDER.match(line):
            found[current].append(line)
    return found


_SHELL_FAILED = re.compile(
    r"(?:command not found|Permission denied|No such file or directory)$", re.MULTILINE
)
"""A shell's own failure, ending its line, besides the card's rule (``says_failed``): a harness that reports
the exit code in the text leaves ``is_error`` unset. A result that merely mentions an error is no failure."""


def _merge(
    old: Iterable[str],
    new: Iterable[str],
    keep: int,
    key: Callable[[str], str] | None = None,
    keeps: Callable[[str, str], bool] | None = None,
) -> list[str]:
    """Old then new items, later duplicates replacing earlier ones (by ``key``), the newest ``keep``.

    ``keeps(earlier, later)`` says when the earlier item stands instead (moved to the later one's place).
    """
    merged: dict[str, str] = {}
    for item in [*old, *new]:
        k = key(item) if key else item
        earlier = merged.pop(k, None)
        merged[k] = earlier if earlier is not None and keeps is not None and keeps(earlier, item) else item
    return list(merged.values())[-keep:]


def _changed(earlier: str, later: str) -> bool:
    """A file's "changed" row stands when it is only read afterwards (edit, then check: still changed)."""
    return _CHANGED in earlier and _CHANGED not in later and _DELETED not in later


_CHANGED = "| changed at position"
_DELETED = "| deleted at position"
_TIMES = re.compile(r" \((\d+) changes\)")
"""A changed row's count of changes, carried from round to round: ``changed at position 287 (46 changes)``."""


def _most_changed(old: list[str], new: list[str], keep: int) -> list[str]:
    """The Completed Work rows: one per file (its latest), the ``keep`` most changed, then the latest kept.

    A file edited 46 times must not give way to six scratch files made and removed at the end (the rows
    were the newest ``keep``). A changed row says how often the file changed (counted over the rounds); a
    removed file says ``deleted`` and counts no change; rows keep their order in the log.
    """
    counts: dict[str, int] = {}
    for row in old:
        carried = _TIMES.search(row)
        if _CHANGED in row:
            counts[_row_path(row)] = int(carried.group(1)) if carried else 1
    for row in new:
        if _CHANGED in row:
            counts[_row_path(row)] = counts.get(_row_path(row), 0) + 1
    rows = _merge(old, new, len(old) + len(new), key=_row_path, keeps=_changed)

    def changes(row: str) -> int:
        return counts.get(_row_path(row), 0) if _CHANGED in row else 0

    chosen = sorted(sorted(range(len(rows)), key=lambda i: (changes(rows[i]), i))[-keep:])
    out = []
    for i in chosen:
        row = _TIMES.sub("", rows[i])
        if changes(row) > 1:
            row = row[: row.rindex(" |")] + f" ({changes(row)} changes) |"
        out.append(row)
    return out


_OPEN_ITEM = re.compile(r"- \[([ ~])\] (.*)|- \.\.\. and (\d+) more open item")
"""A previous round's Pending Work line: an open item (its mark kept), or the count of those left out."""
_MORE = "\0more"
"""The key of the count carried from a previous round (its value ``+N``); a new todo list clears it."""


def _open_item(line: str) -> tuple[str, str]:
    match = _OPEN_ITEM.match(line)
    if match is None:
        return line, " "
    return (_MORE, f"+{match.group(3)}") if match.group(3) else (match.group(2), match.group(1))


def _pending_lines(pending: dict[str, str], limit: int) -> list[str]:
    """The open items in their order, those in progress first kept, then from the head; the rest counted.

    A todo tool writes its list in plan order: the items at its head are the ones being worked on. The
    list's tail was kept, which lost the item in progress and the next ones, and said nothing of them.
    """
    carried = int(pending.get(_MORE, "+0")[1:])
    items = [item for item in pending.items() if item[0] != _MORE]
    if len(items) > limit:
        doing = [item for item in items if item[1] == "~"][:limit]
        rest = [item for item in items if item[1] != "~"][: limit - len(doing)]
        kept = set(doing) | set(rest)
        items_shown = [item for item in items if item in kept]
    else:
        items_shown = items
    lines = [f"- [{mark}] {text}" for text, mark in items_shown]
    if (more := len(items) - len(items_shown) + carried) > 0:
        lines.append(f"- ... and {more} more open item(s), later in the list")
    return lines


def _todos(entry: SpanEntry, pending: dict[str, str], limits: _Limits) -> None:
    """Collect the open work the agent and the user stated; tool output is never read for it.

    A todo-tool call writes the whole current list (it replaces what was pending); a checklist in
    an assistant or user message (``- [ ]``/``- [x]``) adds its open items and closes its done
    ones; a ``TODO:`` line the assistant or the user wrote is open work too. Each item keeps its mark:
    `` `` open, ``~`` in progress.
    """
    if entry.role not in {"assistant", "user"}:
        return
    for call in entry.tool_calls:
        todos = todo_items(arguments_object(call.arguments) or {})
        if todos is None or not re.search(r"todo|plan|task", call.name, re.IGNORECASE):
            continue
        pending.clear()  # a todo tool writes the whole list: the latest call is the current list
        for item in todos:
            if not item.startswith("[x]"):
                pending[_clip(item[4:], limits.line_chars)] = item[1]
    for item in checklist_of(entry.text):
        text = _clip(item[4:], limits.line_chars)
        if item.startswith("[x]"):
            pending.pop(text, None)
        else:
            pending[text] = item[1]
    for match in _TODO_LINE.finditer(entry.text[:_SCAN_CHARS]):
        pending[_clip(match.group(1), limits.line_chars)] = " "


class ExtractiveSummarizer:
    """Summarizes a span with no model call: the same request always gives the same text.

    Files read and changed come from tool calls (structured arguments and shell commands, parsed by
    ``projections.shell_files`` as the session-state card does), commands from shell-tool
    arguments, decisions from the assistant's own sentences, errors from failed tool results and
    the assistant's next words, pending work from todo-tool calls and the checklists and ``TODO``
    lines the assistant or the user wrote (never from tool output: a file's ``# TODO`` is not
    work). Each section keeps its newest
    items up to a fixed count, so round N (previous text + new span) never grows past the bound.
    """

    def __init__(self, limits: _Limits | None = None, *, counter: TokenCounter | None = None) -> None:
        """Use ``limits`` per section; with ``counter``, the size bound is held in its tokens exactly."""
        self.limits = limits or _Limits()
        self.counter = counter

    def _size(self, text: str) -> float:
        """The text's size in tokens (exact with a counter, else characters over ``CHARS_PER_TOKEN``)."""
        return self.counter.count(text) if self.counter is not None else len(text) / CHARS_PER_TOKEN

    @property
    def name(self) -> str:
        """The summarizer kind recorded with every artifact."""
        return "extractive"

    @property
    def config_sha(self) -> str:
        """Hash of the limits (the only configuration)."""
        return content_address("extractive/v1/" + msgspec.json.encode(self.limits).decode())[:16]

    def summarize(self, request: SummaryRequest) -> SummaryDraft:
        """Return the structured summary of the request's span, integrating the previous round."""
        text = self._text(request)
        limits = self.limits
        while self._size(text) > request.max_tokens and limits.identifiers + limits.numbers > _SMALLEST:
            # first give up loose facts: paths, commands and decisions matter more to a continuing agent
            limits = msgspec.structs.replace(
                limits, identifiers=limits.identifiers // 2, numbers=limits.numbers // 2
            )
            text = self._text(request, limits)
        while (
            self._size(text) > request.max_tokens
            and limits.files + limits.commands + limits.decisions > _SMALLEST
        ):
            limits = _Limits(  # shrink every list until the text fits the bound
                files=max(1, limits.files // 2),
                commands=max(1, limits.commands // 2),
                decisions=max(1, limits.decisions // 2),
                errors=max(1, limits.errors // 2),
                pending=max(1, limits.pending // 2),
                identifiers=limits.identifiers,
                numbers=limits.numbers,
                task_chars=max(200, limits.task_chars // 2),
                line_chars=max(60, limits.line_chars // 2),
            )
            text = self._text(request, limits)
        while self._size(text) > request.max_tokens:
            text = text[: int(len(text) * 0.9)] + "…"
        return SummaryDraft(text=text, model=None, prompt_sha=content_address(text))

    def _text(self, request: SummaryRequest, limits: _Limits | None = None) -> str:
        limits = limits or self.limits
        old = _sections(request.previous)
        for entry in request.entries:  # deeper clip-archive batches fold the batches they cover
            if entry.role == "summary":
                for name, lines in _sections(entry.text).items():
                    old[name].extend(line for line in lines if line not in old[name])
        span = _Span(limits, dict(_open_item(line) for line in old["Pending Work"] if _OPEN_ITEM.match(line)))
        for entry in request.entries:
            span.add(entry)
        state = [f"- Working on: {span.working_on or 'see the latest turns'}"]
        if span.last_done:
            state.append(f"- Last completed: {span.last_done}")
        files = _most_changed(old["Completed Work"], span.files, limits.files)
        pending = _pending_lines(span.pending, limits.pending)
        body = {
            "Original Task": [_clip(request.original_task, limits.task_chars) or "(none recorded)"],
            "Completed Work": [*_TABLE_HEAD, *files] if files else ["(no files touched)"],
            "Commands Run": _merge(old["Commands Run"], span.commands, limits.commands) or ["(none)"],
            "Key Technical Decisions": _merge(
                old["Key Technical Decisions"], span.decisions, limits.decisions
            )
            or ["(none stated)"],
            "Errors & Resolutions": _merge(old["Errors & Resolutions"], span.errors, limits.errors)
            or ["(none)"],
            "Current State": state,
            "Pending Work": pending or ["(none open)"],
            "Key Facts": _key_facts(old["Key Facts"], request, limits),
        }
        lines = [
            f"## Session Summary (Compaction Round {request.round})",
            f"Covers log positions {request.covers_from}-{request.covers_through}.",
        ]
        for name in _SECTIONS:
            lines.append(f"### {name}")
            lines.extend(body[name])
        return "\n".join(lines)


def _key_facts(old: list[str], request: SummaryRequest, limits: _Limits) -> list[str]:
    """Identifiers and numbers the span states, verbatim, the newest kept: what a later question may need."""
    facts = facts_of(request.entries)
    earlier = {
        line.split(":", 1)[0]: line.split(":", 1)[1].strip().split(", ") for line in old if ":" in line
    }
    lines = []
    for label, found, keep in (
        ("Identifiers", facts.identifiers, limits.identifiers),
        ("Numbers", facts.numbers, limits.numbers),
    ):
        merged = _merge([v for v in earlier.get(label, []) if v], found, keep)
        if merged:
            lines.append(f"{label}: {', '.join(merged)}")
    return lines or ["(none)"]


def _row_path(row: str) -> str:
    """The path cell of a Completed Work table row."""
    cells = row.split("|")
    return cells[1].strip() if len(cells) > 1 else row


class _Span:
    """Collects what one span says: files, commands, decisions, errors and their resolutions, todos, state."""

    def __init__(self, limits: _Limits, pending: dict[str, str]) -> None:
        self.limits = limits
        self.pending = pending
        self.files: list[str] = []
        self.commands: list[str] = []
        self.decisions: list[str] = []
        self.errors: list[str] = []
        self.last_done = ""
        self.working_on = ""
        self._failed: SpanEntry | None = None

    def add(self, entry: SpanEntry) -> None:
        """Take one entry of the span into account."""
        _todos(entry, self.pending, self.limits)
        if entry.role == "tool":
            if says_failed(entry.is_error, entry.text) or _SHELL_FAILED.search(entry.text[:400]):
                self._failed = entry
        elif entry.role == "assistant":
            self._assistant(entry)

    def _assistant(self, entry: SpanEntry) -> None:
        line = self.limits.line_chars
        if self._failed is not None and entry.text.strip():
            failed = self._failed
            first = _clip(failed.text.strip().splitlines()[0], 120) if failed.text.strip() else ""
            self.errors.append(
                f"- {failed.tool_name or 'tool'} [{failed.position}]: {first} → {_clip(entry.text, line)}"
            )
            self._failed = None
        self.decisions.extend(
            f"- {_clip(sentence, line)}"
            for sentence in _SENTENCE_END.split(entry.text[:_SCAN_CHARS])
            if _DECISION.search(sentence)
        )
        if entry.text.strip():
            self.working_on = _clip(entry.text, line)
        for call in entry.tool_calls:
            arguments = arguments_object(call.arguments) or {}
            touched = files_of_call(call.name, arguments)
            self.files.extend(
                f"| {path} | {call.name} {_DELETED if path in touched.deleted else _CHANGED} {at} |"
                for path in touched.changed
                for at in (entry.position,)
            )
            self.files.extend(
                f"| {path} | {call.name} | read at position {entry.position} |" for path in touched.read
            )
            paths = [*touched.changed, *touched.read]
            command = command_of(arguments)
            if command:
                self.commands.append(f"- `{command}`")
            target = (paths or [command or ""])[0]
            self.last_done = _clip(f"{call.name} {target}".strip(), line)
