"""Fixtures for the wire formats: a strict checker against the SDK request types, a rich neutral context."""

from __future__ import annotations

import collections.abc
import functools
import types
import typing
from typing import Any

import pydantic
import pytest
import typing_extensions
from anthropic.types import MessageParam, TextBlockParam, ToolParam, message_create_params
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam, completion_create_params

from tests.projections.rendered_builders import Neutral, context, message, neutral, rich_context

_WRAPPERS = {typing.Required, typing.NotRequired, typing.Annotated, typing_extensions.ReadOnly}
_SEQUENCES = {list, tuple, collections.abc.Iterable, collections.abc.Sequence}
_MAPPINGS = {dict, collections.abc.Mapping}


@functools.cache
def _fields(td: type) -> tuple[dict[str, Any], frozenset[str], bool]:
    """Hints, required keys and whether extra keys are allowed, for a TypedDict class.

    ``__required_keys__`` is wrong for the SDKs' stringified ``Required[...]`` annotations, so
    requiredness is read from the resolved hints.
    """
    hints = typing.get_type_hints(td, include_extras=True)
    total = getattr(td, "__total__", True)
    required = set()
    for name, hint in hints.items():
        origin = typing.get_origin(hint)
        if origin is typing.Required or (total and origin is not typing.NotRequired):
            required.add(name)
    extra = getattr(td, "__pydantic_config__", {}).get("extra") == "allow"
    return hints, frozenset(required), extra


def _unwrap(tp: Any) -> Any:
    while typing.get_origin(tp) in _WRAPPERS:
        tp = typing.get_args(tp)[0]
    return tp


def shape_errors(value: Any, tp: Any, path: str = "$") -> list[str]:
    """Return why ``value`` (plain JSON-like data) does not conform to the SDK type ``tp``.

    Stricter than pydantic on TypedDicts: unknown keys are errors (unless the SDK allows extras),
    required keys must be present, iterables are lists checked item by item, bools are not ints.
    """
    tp = _unwrap(tp)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any or tp is object:
        errors: list[str] = []
    elif origin in (typing.Union, types.UnionType):
        errors = _union_errors(value, args, path)
    elif origin is typing.Literal:
        ok = any(value == arg and type(value) is type(arg) for arg in args)
        errors = [] if ok else [f"{path}: {value!r} is not one of {args}"]
    elif typing_extensions.is_typeddict(tp):
        errors = _typeddict_errors(value, tp, path)
    elif origin in _SEQUENCES or getattr(origin, "__name__", "") == "SequenceNotStr":
        errors = _list_errors(value, args[0] if args else Any, path)
    elif origin in _MAPPINGS or tp in _MAPPINGS:
        errors = _mapping_errors(value, args[1] if len(args) == 2 else Any, path)
    else:
        errors = _scalar_errors(value, tp, path)
    return errors


def _union_errors(value: Any, alternatives: tuple[Any, ...], path: str) -> list[str]:
    """Accept any alternative; else report the one that fails least on its discriminators."""
    attempts = [shape_errors(value, alt, path) for alt in alternatives]
    if any(not errors for errors in attempts):
        return []
    discriminators = (f"{path}:", f"{path}.type:", f"{path}.role:")
    return min(attempts, key=lambda errors: (sum(e.startswith(discriminators) for e in errors), len(errors)))


def _list_errors(value: Any, item_type: Any, path: str) -> list[str]:
    if not isinstance(value, list):
        return [f"{path}: expected a list, got {type(value).__name__}"]
    return [e for i, item in enumerate(value) for e in shape_errors(item, item_type, f"{path}[{i}]")]


def _mapping_errors(value: Any, item_type: Any, path: str) -> list[str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        return [f"{path}: expected an object, got {type(value).__name__}"]
    return [e for k, v in value.items() for e in shape_errors(v, item_type, f"{path}.{k}")]


def _scalar_errors(value: Any, tp: Any, path: str) -> list[str]:
    if tp is type(None):
        ok = value is None
    elif tp is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(tp, type):
        ok = isinstance(value, tp)
    else:
        return [f"{path}: unsupported type {tp!r}"]
    return [] if ok else [f"{path}: expected {getattr(tp, '__name__', tp)}, got {value!r:.60}"]


def _typeddict_errors(value: Any, td: type, path: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{path}: expected {td.__name__} (an object), got {type(value).__name__}"]
    hints, required, extra = _fields(td)
    errors = [f"{path}: {td.__name__} lacks required key {k!r}" for k in sorted(required - value.keys())]
    if not extra:
        errors += [f"{path}: {td.__name__} has no key {k!r}" for k in sorted(value.keys() - hints.keys())]
    for key, item in value.items():
        if key in hints:
            errors += shape_errors(item, hints[key], f"{path}.{key}")
    return errors


def _consume(value: Any) -> None:
    """Drain pydantic's lazy ``ValidatorIterator``s so that the items they hold get validated."""
    if isinstance(value, dict):
        for item in value.values():
            _consume(item)
    elif isinstance(value, list | tuple) or type(value).__name__ == "ValidatorIterator":
        for item in value:
            _consume(item)


class SdkShapes:
    """Checks payloads against the official SDK request types, strictly and with pydantic."""

    def __init__(self) -> None:
        """Build the pydantic adapters once."""
        self._adapters: dict[Any, pydantic.TypeAdapter[Any]] = {}

    def errors(self, value: Any, tp: Any) -> list[str]:
        """Return the strict shape errors of ``value`` against ``tp``, plus pydantic's verdict."""
        errors = shape_errors(value, tp)
        adapter = self._adapters.get(tp)
        if adapter is None:
            adapter = self._adapters[tp] = pydantic.TypeAdapter(tp)
        try:
            _consume(adapter.validate_python(value, strict=True))
        except pydantic.ValidationError as error:
            errors.append(f"pydantic: {str(error)[:600]}")
        return errors

    def openai_errors(self, payload: dict[str, Any]) -> list[str]:
        """Return every shape error of a ``to_openai`` payload (elements and the whole request)."""
        errors = [e for m in payload["messages"] for e in self.errors(m, ChatCompletionMessageParam)]
        errors += [e for t in payload.get("tools", []) for e in self.errors(t, ChatCompletionToolParam)]
        request = {"model": "gpt-4o", **payload}
        return errors + self.errors(request, completion_create_params.CompletionCreateParamsNonStreaming)

    def anthropic_errors(self, payload: dict[str, Any]) -> list[str]:
        """Return every shape error of a ``to_anthropic`` payload (elements and the whole request)."""
        errors = [e for m in payload["messages"] for e in self.errors(m, MessageParam)]
        errors += [e for b in payload.get("system", []) for e in self.errors(b, TextBlockParam)]
        errors += [e for t in payload.get("tools", []) for e in self.errors(t, ToolParam)]
        request = {"model": "claude-sonnet-4-5", "max_tokens": 1024, **payload}
        return errors + self.errors(request, message_create_params.MessageCreateParamsNonStreaming)


@pytest.fixture(scope="session")
def sdk() -> SdkShapes:
    """The SDK shape checker (session-scoped so Hypothesis tests may use it)."""
    return SdkShapes()


__all__ = ["Neutral", "context", "message", "neutral", "rich_context"]
