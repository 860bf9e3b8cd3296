"""Documented limits on values that cross the boundary: nesting depth and idempotency keys."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import date, datetime
from itertools import chain, compress, repeat
from operator import is_
from typing import Any

import msgspec
from msgspec.structs import astuple

__all__ = [
    "MAX_DEPTH",
    "MAX_IDEMPOTENCY_KEY_CHARS",
    "MAX_SESSION_ID_CHARS",
    "MAX_STORED_DEPTH",
    "MAX_STORED_INT",
    "MAX_TOKENS",
    "any_too_deep",
    "json_text_too_deep",
    "too_deep",
    "too_deep_by_walk",
]

MAX_DEPTH = 64
"""Deepest nesting of lists and objects accepted in ``meta``, in tool-call arguments (an object or JSON
text) and in tool parameters. A flat object is depth 1; ``{"a": [1]}`` is depth 2. Real tool calls nest
fewer than 10 levels; the limit keeps every recursive encoder and decoder on the way (json, msgspec,
pydantic, the provider formats) far from Python's recursion limit (1,000 frames)."""

MAX_STORED_DEPTH = 2 * MAX_DEPTH
"""Deepest nesting the store encodes in one event: the event's own structure around values of at most
``MAX_DEPTH`` (a last line of defence for values no boundary model checked, e.g. session metadata)."""

MAX_STORED_INT = 2**63 - 1
"""Largest whole number every store keeps (a signed 64-bit integer): positions, versions, token counts."""

MAX_IDEMPOTENCY_KEY_CHARS = 1024
"""Longest idempotency key, in characters; a key is non-empty text that encodes as UTF-8."""

MAX_TOKENS = 100_000_000
"""Largest token count a budget may name (window, reserves, a render's budget): 100 M tokens, ten times the
largest context window offered; a larger number is a typo or an overflow, refused as bad configuration."""

MAX_SESSION_ID_CHARS = 1024
"""Longest session id, in characters (its side streams add a short suffix): a longer one is refused as bad
input before any store sees it (PostgreSQL cannot index a 1 MB key)."""

_SEQUENCES = (list, tuple, set, frozenset)
_SCALARS = frozenset({str, bytes, int, float, bool, type(None)})
_JSON_SYNTAX = re.compile(r'["\[\]{}]')
_STRING_REST = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_JSON_OPENING = re.compile(r"[ \t\r\n]*[\[{]")


def too_deep(value: object, limit: int = MAX_DEPTH) -> bool:
    """Return True when ``value`` nests containers (dicts, lists, tuples, structs) over ``limit`` deep.

    The answer is ``too_deep_by_walk``'s (the definition). A value a few levels deep built only of
    builtin scalars, dicts, lists, tuples, sets and msgspec Structs (an event with a flat ``meta``) is
    measured exactly by a short bounded recursion; anything else (deeper, another type, a value that
    contains itself) is answered by the walk, which never recurses.
    """
    depth = _small_depth(value, _SMALL_ROOM)
    if depth is None:
        return too_deep_by_walk(value, limit)
    return depth > limit


_SMALL_ROOM = 8
"""Levels the bounded recursion of ``_small_depth`` descends before it leaves the answer to the walk."""

_LEAVES = frozenset({*_SCALARS, datetime, date, type(msgspec.UNSET)})
"""Exact types the walk treats as leaves (depth 0): scalars, and values without struct fields."""
_ITERATED = frozenset({list, tuple, set, frozenset})
_EMPTY_DEPTH_ONE = _ITERATED | {dict}


def _children(value: object, kind: type) -> Any:
    """The children the walk visits below an exact dict, list, tuple, set or a Struct; else None."""
    if kind is dict:
        return value.values()  # type: ignore[attr-defined]
    if kind in _ITERATED:
        return value
    if isinstance(value, msgspec.Struct):
        return astuple(value)
    return None


def _small_depth(value: object, room: int) -> int | None:
    """The container depth of ``value`` if it is found within ``room`` levels of known types; else None.

    Depth as ``too_deep_by_walk`` counts it: 0 for a leaf, else 1 + the deepest child (dict values,
    items, a Struct's fields). Only exact builtin types and msgspec Structs are descended, so every
    case here is one the walk handles the same way.
    """
    kind = type(value)
    if kind in _LEAVES:
        return 0
    if room == 0:
        return None
    children = _children(value, kind)
    if children is None:
        return None
    if _LEAVES.issuperset(map(type, children)):
        return 1  # only leaves below (or nothing): the common flat value, decided in C
    deepest = 0
    for child in children:
        kind = type(child)
        if kind in _LEAVES:
            continue
        if (kind in _EMPTY_DEPTH_ONE and not child) or (
            isinstance(child, msgspec.Struct) and _LEAVES.issuperset(map(type, astuple(child)))
        ):
            deepest = deepest or 1  # an empty dict, list, tuple or set, or a Struct of leaves: depth 1
            continue
        found = _small_depth(child, room - 1)
        if found is None:
            return None
        deepest = max(deepest, found)
    return deepest + 1


def any_too_deep(values: Sequence[object], limit: int = MAX_DEPTH) -> bool:
    """Return ``any(too_deep(value, limit) for value in values)``, walking all the values at once.

    The walk of ``too_deep_by_walk`` over every value together, level by level, with each level kept
    as groups of items: the values, then per Struct type one group per field (the same field of every
    Struct, usually of one type), the items of a group's dicts, lists, tuples and sets. Grouping and
    gathering are done in C (``astuple``, ``chain``, slices), so a batch of events costs no Python call
    per event. A group holding a type that is neither a leaf nor one of these (a dict subclass, an
    object that is not a Struct) leaves the answer to ``too_deep`` of each value.
    """
    groups: list[list[Any]] = [list(values)]
    depth = 0
    while groups:
        below: list[list[Any]] = []
        containers = False
        for group in groups:
            present = set(map(type, group))
            for kind in present - _LEAVES:
                containers = True
                members = group if len(present) == 1 else list(_of_kind(group, kind))
                if kind is dict:
                    below.append(list(chain.from_iterable(map(dict.values, members))))
                elif kind in _ITERATED:
                    below.append(list(chain.from_iterable(members)))
                elif issubclass(kind, msgspec.Struct):
                    width = len(kind.__struct_fields__)
                    fields = list(chain.from_iterable(map(astuple, members)))
                    below.extend(fields[i::width] for i in range(width))
                else:
                    return any(too_deep(value, limit) for value in values)
        if not containers:
            return False
        depth += 1
        if depth > limit:
            return True
        groups = [group for group in below if group]
    return False


def _of_kind(group: list[Any], kind: type) -> Any:
    """The items of ``group`` of exactly type ``kind``, chosen in C."""
    return compress(group, map(is_, map(type, group), repeat(kind)))


def too_deep_by_walk(value: object, limit: int = MAX_DEPTH) -> bool:
    """The definition of ``too_deep``: True when ``value`` nests containers over ``limit`` deep.

    Iterative, level by level (never recursion), so a value nested 100,000 deep, or one that contains
    itself, is answered without a ``RecursionError``; the walk stops at the first level past the limit.
    """
    level: list[Any] = [value]
    depth = 0
    while True:
        below: list[Any] = []
        containers = False
        for item in level:
            kind = type(item)
            if kind in _SCALARS:
                continue
            if isinstance(item, dict):
                below.extend(item.values())
            elif isinstance(item, _SEQUENCES):
                below.extend(item)
            else:
                fields: tuple[str, ...] | None = getattr(kind, "__struct_fields__", None)
                if fields is None:
                    continue  # a leaf such as a datetime
                below.extend(getattr(item, name) for name in fields)
            containers = True
        if not containers:
            return False
        depth += 1
        if depth > limit:
            return True
        level = below


def json_text_too_deep(text: str, limit: int = MAX_DEPTH) -> bool:
    """Return True when JSON ``text`` opens more than ``limit`` nested arrays or objects.

    A linear scan of the brackets outside strings (no recursion, no backtracking). Only text that
    starts with ``[`` or ``{`` is scanned, and the scan ends where a decoder would stop: when the
    top-level value closes or a string never ends. Text that is not JSON is never decoded recursively,
    so only its bracket prefix counts.
    """
    opening = _JSON_OPENING.match(text)
    if opening is None or text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    at = opening.end() - 1
    while (found := _JSON_SYNTAX.search(text, at)) is not None:
        char = found.group()
        if char == '"':
            rest = _STRING_REST.match(text, found.end())
            if rest is None:
                return False
            at = rest.end()
            continue
        at = found.end()
        if char in "[{":
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
            if depth <= 0:
                return False
    return False
