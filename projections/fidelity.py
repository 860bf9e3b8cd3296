"""What a summary kept of its span: the file paths, commands, identifiers and numbers stated there."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec
from contextledger.domain.errors import SummaryRejectedError
from contextledger.domain.events import Fidelity
from contextledger.projections.summary_requests import CLIPPED, SpanEntry
from contextledger.projections.wire import arguments_object

__all__ = [
    "FACTS_REQUIRED",
    "Facts",
    "check_keeps_facts",
    "command_of",
    "facts_of",
    "fidelity",
    "paths_in_arguments",
]

FACTS_REQUIRED = 3
"""A span with at least this many facts (paths, commands, identifiers, numbers) needs a model summary that
keeps one of them (``check_keeps_facts``)."""

MISSING_LISTED = 40
"""How many missing facts an artifact lists by name (the fractions count all of them)."""

_PATH = re.compile(
    r"(?<![\w@])(?:\.{0,2}/)?(?:[\w.-]+/)+[\w.-]+"
    r"|\b[\w-]+\.(?:py|js|ts|tsx|json|toml|ya?ml|md|txt|cfg|ini|sh|rs|go|java|c|h|cpp|html|css|sql|lock)\b"
)
_IDENTIFIER = re.compile(
    r"\b(?:[A-Za-z_]\w*\.)+[A-Za-z_]\w*\b"  # dotted: module.function
    r"|\b[a-z]+(?:_[a-z0-9]+)+\b"  # snake_case
    r"|\b[a-z]+(?:[A-Z][a-z0-9]+)+\b|\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+\b"  # camelCase, PascalCase
    r"|\b(?=[A-Z0-9]*[A-Z])(?=[A-Z0-9]*\d)[A-Z0-9]{5,}\b"  # codes such as booking ids: ZFA04Y
)
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)+(?![\w.])|(?<![\w.])\d{3,}(?![\w.])")
_PATH_KEYS = (
    "path",
    "file",
    "file_path",
    "filepath",
    "filename",
    "file_name",
    "target_file",
    "directory",
    "dir",
)
_COMMAND_KEYS = ("command", "cmd", "bash", "shell", "script")
_SCAN_CHARS = 20_000
"""How much of one entry's text is scanned for facts (a 50 MB tool output must not stall a summary)."""


class Facts(msgspec.Struct, frozen=True, kw_only=True):
    """The verbatim facts of a span, each kind in first-seen order."""

    paths: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    identifiers: tuple[str, ...] = ()
    numbers: tuple[str, ...] = ()


def paths_in_arguments(arguments: Mapping[str, Any]) -> list[str]:
    """Return the file paths a tool call's arguments name (``path``, ``file_path``, ...)."""
    found = []
    for key in _PATH_KEYS:
        value = arguments.get(key)
        if isinstance(value, str) and value.strip() and "\n" not in value:
            found.append(value.strip())
        elif isinstance(value, list):
            found.extend(v.strip() for v in value if isinstance(v, str) and v.strip() and "\n" not in v)
    return found


def command_of(arguments: Mapping[str, Any]) -> str | None:
    """Return the shell command a tool call's arguments carry (first line, as given), if any."""
    for key in _COMMAND_KEYS:
        value = arguments.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip().splitlines()[0][:300]
    return None


def _ordered(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(v for v in values if v))


def facts_of(entries: Iterable[SpanEntry]) -> Facts:
    """Return the paths, commands, identifiers and numbers the entries state verbatim."""
    paths: list[str] = []
    commands: list[str] = []
    identifiers: list[str] = []
    numbers: list[str] = []
    for entry in entries:
        for call in entry.tool_calls:
            arguments = arguments_object(call.arguments) or {}
            paths.extend(paths_in_arguments(arguments))
            command = command_of(arguments)
            if command:
                commands.append(command)
        if entry.role in {"user", "assistant"}:
            text = CLIPPED.sub("\n", entry.text[:_SCAN_CHARS])  # a clip's mark is not the entry's words
            paths.extend(m.group(0) for m in _PATH.finditer(text))
            identifiers.extend(m.group(0) for m in _IDENTIFIER.finditer(text))
            numbers.extend(m.group(0) for m in _NUMBER.finditer(text))
    return Facts(
        paths=_ordered(paths),
        commands=_ordered(commands),
        identifiers=_ordered(i for i in identifiers if i not in set(paths)),
        numbers=_ordered(numbers),
    )


def _kept(values: tuple[str, ...], text: str) -> tuple[float, list[str]]:
    if not values:
        return 1.0, []
    missing = [v for v in values if v not in text]
    return (len(values) - len(missing)) / len(values), missing


def fidelity(facts: Facts, text: str) -> Fidelity:
    """Return which of ``facts`` appear verbatim in ``text``."""
    kinds = (facts.paths, facts.commands, facts.identifiers, facts.numbers)
    scores = [_kept(values, text) for values in kinds]
    total = sum(len(values) for values in kinds)
    missing = [m for _, lost in scores for m in lost]
    overall = 1.0 if total == 0 else (total - len(missing)) / total
    return Fidelity(
        paths=scores[0][0],
        commands=scores[1][0],
        identifiers=scores[2][0],
        numbers=scores[3][0],
        overall=overall,
        total=total,
        missing=tuple(missing[:MISSING_LISTED]),
    )


def check_keeps_facts(kept: Fidelity) -> None:
    """Refuse a model's summary that keeps none of the span's facts, when it has ``FACTS_REQUIRED`` or more.

    Such a text is a refusal ("I'm sorry, but I can't help with that."), an apology or a template filled
    with nothing, whatever the model's finish reason said: applied, it would replace the history.

    Raises:
        SummaryRejectedError: Not one of the span's facts is in the text.
    """
    if kept.total >= FACTS_REQUIRED and kept.overall == 0:
        raise SummaryRejectedError(
            f"the summary keeps none of the span's {kept.total} facts (paths, commands, ids)"
        )
