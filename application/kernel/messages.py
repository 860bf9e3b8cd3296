"""Boundary models of the append API: messages as callers send them, validated by pydantic.

Every validation failure is an ``InvalidMessageError`` (never a raw ``pydantic.ValidationError``),
whether a model is built directly (``UserMessage(content=None)``) or parsed from a dict. ``meta``,
tool-call arguments (an object or JSON text) and tool parameters may nest at most ``MAX_DEPTH`` levels.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar

import pydantic
from contextledger.application.kernel.wire_shapes import ledger_messages
from contextledger.domain.errors import InvalidMessageError
from contextledger.domain.limits import (
    MAX_DEPTH,
    MAX_IDEMPOTENCY_KEY_CHARS,
    MAX_SESSION_ID_CHARS,
    MAX_STORED_INT,
    json_text_too_deep,
    too_deep,
)

__all__ = [
    "SIDE_STREAM_SEPARATOR",
    "AssistantMessage",
    "MediaIn",
    "Message",
    "PlainMessage",
    "ToolCallIn",
    "ToolResult",
    "ToolSchemaIn",
    "UserMessage",
    "check_idempotency_key",
    "check_list",
    "check_position",
    "check_session_fields",
    "check_session_id",
    "check_stream_id",
    "parse_for_append",
    "parse_message",
    "parse_messages",
    "plain_message",
    "plain_model",
]

_STRICT = pydantic.ConfigDict(extra="forbid", frozen=True)
Str = pydantic.StrictStr
"""Text fields accept only strings: no numbers, lists or content blocks coerced into text."""

_V = TypeVar("_V")
_WHAT = {
    "UserMessage": "user message",
    "AssistantMessage": "assistant message",
    "ToolResult": "tool message",
    "ToolCallIn": "tool call",
    "ToolSchemaIn": "tool schema",
    "MediaIn": "media part",
}


def _explain(error: Any) -> str:
    if error["type"] in {"string_type", "str_type"}:
        return "must be text (a string); non-text content such as images or content blocks is not accepted"
    if error["type"] == "value_error" and "error" in error.get("ctx", {}):
        return str(error["ctx"]["error"])
    return str(error["msg"])


def _problems(error: pydantic.ValidationError, skip: int = 0) -> str:
    """Name each failing field and what was wrong, without printing the (possibly huge) input."""
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc'][skip:]) or 'message'}: {_explain(e)}" for e in error.errors()
    )


def _shallow(value: _V, what: str) -> _V:
    """Refuse a value nested deeper than ``MAX_DEPTH`` (checked without recursion)."""
    if too_deep(value, MAX_DEPTH):
        msg = f"{what} nests lists and objects more than {MAX_DEPTH} levels deep (the limit)"
        raise ValueError(msg)
    return value


class _Boundary(pydantic.BaseModel):
    """A boundary model whose construction raises ``InvalidMessageError`` on bad input."""

    model_config = _STRICT

    def __init__(self, **data: Any) -> None:
        """Validate ``data``; a failure is an ``InvalidMessageError`` naming every bad field."""
        try:
            super().__init__(**data)
        except pydantic.ValidationError as error:
            msg = f"invalid {_WHAT.get(type(self).__name__, 'message')}: {_problems(error)}"
            raise InvalidMessageError(msg) from None


Meta = Annotated[dict[str, Any], pydantic.AfterValidator(lambda v: _shallow(v, "meta"))]
"""Free-form metadata: a JSON-like object of at most ``MAX_DEPTH`` levels."""


def _arguments(value: str | dict[str, Any]) -> str | dict[str, Any]:
    if isinstance(value, str):
        if json_text_too_deep(value, MAX_DEPTH):
            msg = f"arguments JSON nests arrays and objects more than {MAX_DEPTH} levels deep (the limit)"
            raise ValueError(msg)
        return value
    return _shallow(value, "arguments")


class ToolCallIn(_Boundary):
    """A tool call as the model issued it; ``arguments`` is JSON text or an object."""

    id: Annotated[Str, pydantic.Field(min_length=1)]
    name: Annotated[Str, pydantic.Field(min_length=1)]
    arguments: Annotated[Str | dict[str, Any], pydantic.AfterValidator(_arguments)] = "{}"


class ToolSchemaIn(_Boundary):
    """A tool the model may call."""

    name: Annotated[Str, pydantic.Field(min_length=1)]
    description: str = ""
    parameters: Annotated[dict[str, Any], pydantic.AfterValidator(lambda v: _shallow(v, "parameters"))] = (
        pydantic.Field(default_factory=dict)
    )
    strict: bool | None = None
    """The provider's strict-schema flag as the tool carried it (OpenAI, Anthropic); None when absent."""


class MediaIn(_Boundary):
    """An image or file part of a user message (``media_shapes`` reads each provider's part as this)."""

    kind: Literal["image", "file"]
    source: Literal["base64", "url", "file_id"]
    data: Annotated[Str, pydantic.Field(min_length=1)]
    media_type: Str | None = None
    detail: Literal["low", "high", "auto"] | None = None
    filename: Str | None = None
    offset: Annotated[int, pydantic.Field(ge=0)] = 0


class UserMessage(_Boundary):
    """Something the user said: text, and the images and files it showed (``media``)."""

    role: Literal["user"] = "user"
    content: Str
    media: tuple[MediaIn, ...] = ()
    at: datetime | None = None
    meta: Meta = pydantic.Field(default_factory=dict)


class AssistantMessage(_Boundary):
    """The model's answer: text, optional reasoning, tool calls."""

    role: Literal["assistant"] = "assistant"
    content: Str | None = None
    reasoning: Str | None = None
    reasoning_signature: Str | None = None
    tool_calls: tuple[ToolCallIn, ...] = ()
    model: str | None = None
    at: datetime | None = None
    meta: Meta = pydantic.Field(default_factory=dict)


class ToolResult(_Boundary):
    """The result of one tool call; ``tool_name`` defaults to the name of the call."""

    role: Literal["tool"] = "tool"
    call_id: Annotated[Str, pydantic.Field(min_length=1)]
    content: Str
    tool_name: str | None = None
    is_error: pydantic.StrictBool = False
    at: datetime | None = None
    meta: Meta = pydantic.Field(default_factory=dict)


Message = Annotated[UserMessage | AssistantMessage | ToolResult, pydantic.Field(discriminator="role")]
"""Any message the append API takes, told apart by ``role``."""

_ADAPTER: pydantic.TypeAdapter[UserMessage | AssistantMessage | ToolResult] = pydantic.TypeAdapter(Message)
_ROLES = ("user", "assistant", "tool")


def parse_messages(raw: object) -> list[UserMessage | AssistantMessage | ToolResult]:
    """Validate one message given in the ledger's or a provider's shape; return its ledger messages.

    Provider shapes (see ``wire_shapes.ledger_messages``): an OpenAI ``tool`` message, an assistant
    message with OpenAI ``tool_calls`` or Anthropic blocks, a Responses ``function_call_output``, the
    SDK objects of these. An Anthropic user message of ``tool_result`` blocks gives one tool result
    per block, then its text, so the list may hold several messages.
    """
    plain = plain_message(raw)
    if plain is not None:
        return [plain_model(plain)]
    if isinstance(raw, UserMessage | AssistantMessage | ToolResult):
        return [raw]
    return [_parse_one(m) for m in ledger_messages(raw)]


PlainMessage = tuple[str, str, str]
"""A plain message as ``plain_message`` reads it: ``(role, content, call_id)``, the id "" for a user's."""

_USER_KEYS = frozenset({"role", "content"})
_TOOL_KEYS = frozenset({"role", "call_id", "content"})
_set_attribute = object.__setattr__


def plain_message(raw: object) -> PlainMessage | None:
    """The fast path of ``parse_messages``: the plainest dicts, valid as they are; None for any other.

    ``{"role": "user", "content": text}`` and ``{"role": "tool", "call_id": id, "content": text}`` with
    exact ``str`` values (a non-empty id) are already in the ledger's shape and valid: what validation
    would keep of them is ``(role, content, call_id)`` (every other field at its default). Any other
    value takes the full path. ``tests/application/kernel/test_plain_messages.py`` checks that the model
    built from it (``plain_model``) equals the full path's result.
    """
    if type(raw) is not dict:
        return None
    role = raw.get("role")
    content = raw.get("content")
    if type(content) is not str or type(role) is not str:
        return None
    if role == "user" and raw.keys() == _USER_KEYS:
        return ("user", content, "")
    if role == "tool" and raw.keys() == _TOOL_KEYS:
        call_id = raw["call_id"]
        if type(call_id) is str and call_id:
            return ("tool", content, call_id)
    return None


def plain_model(plain: PlainMessage) -> UserMessage | ToolResult:
    """The model of a plain message, built as pydantic's validation builds it.

    The same fields in the model's order, the same defaults (a new ``meta`` dict), the same
    ``model_fields_set``, without validating again (pydantic's own ``model_construct`` measured 11 µs a
    message, slower than validating).
    """
    role, content, call_id = plain
    if role == "user":
        message: Any = object.__new__(UserMessage)
        fields: dict[str, Any] = {"role": "user", "content": content, "media": (), "at": None, "meta": {}}
    else:
        message = object.__new__(ToolResult)
        fields = {
            "role": "tool",
            "call_id": call_id,
            "content": content,
            "tool_name": None,
            "is_error": False,
            "at": None,
            "meta": {},
        }
    _set_attribute(message, "__dict__", fields)
    _set_attribute(message, "__pydantic_fields_set__", set(_USER_KEYS if role == "user" else _TOOL_KEYS))
    _set_attribute(message, "__pydantic_extra__", None)
    _set_attribute(message, "__pydantic_private__", None)
    return message  # type: ignore[no-any-return]  # built as the model of its role


def parse_for_append(
    messages: Iterable[object],
) -> list[UserMessage | AssistantMessage | ToolResult | PlainMessage]:
    """``parse_messages`` of each message, in order, a plain one kept as its ``PlainMessage``.

    What an append drafts: ``drafting.EventDrafter.event`` builds the same event from a plain message
    as from its model, so the batch builds no model for it.
    """
    parsed: list[UserMessage | AssistantMessage | ToolResult | PlainMessage] = []
    for raw in messages:
        plain = plain_message(raw)
        if plain is None:
            parsed.extend(parse_messages(raw))
        else:
            parsed.append(plain)
    return parsed


def parse_message(raw: object) -> UserMessage | AssistantMessage | ToolResult:
    """Validate a message given as a model or a dict (either provider's shape too); raise on bad input.

    Raises:
        InvalidMessageError: The message is invalid, or holds several (an Anthropic user message
            with many ``tool_result`` blocks: use ``parse_messages`` or ``Ledger.append_many``).
    """
    parsed = parse_messages(raw)
    if len(parsed) != 1:
        msg = f"this message holds {len(parsed)} messages (results, text): append them with parse_messages"
        raise InvalidMessageError(msg)
    return parsed[0]


def _parse_one(raw: object) -> UserMessage | AssistantMessage | ToolResult:
    if isinstance(raw, UserMessage | AssistantMessage | ToolResult):
        return raw
    if not isinstance(raw, dict):
        msg = f"a message must be a dict or a message model, not {type(raw).__name__}"
        raise InvalidMessageError(msg)
    role = raw.get("role")
    if role not in _ROLES:
        msg = f"unknown role {role!r}: expected one of {', '.join(_ROLES)}"
        raise InvalidMessageError(msg)
    try:
        return _ADAPTER.validate_python(raw)
    except pydantic.ValidationError as error:
        msg = f"invalid {role} message: {_problems(error, skip=1)}"
        raise InvalidMessageError(msg) from None


SIDE_STREAM_SEPARATOR = "::"
"""Reserved in session ids: ``<session>::summaries`` and ``<session>::calls`` are a session's side streams."""


def check_session_id(session_id: object) -> str:
    """Return ``session_id`` if a session may be started under it; raise ``InvalidMessageError`` if not.

    An id is non-empty text of at most ``MAX_SESSION_ID_CHARS`` characters that encodes as UTF-8, holds
    no NUL and no ``::`` (which separates a session's id from its side streams' names, so every view can
    tell whose stream it reads).
    """
    session_id = check_stream_id(session_id)
    if len(session_id) > MAX_SESSION_ID_CHARS:
        msg = f"a session id may have at most {MAX_SESSION_ID_CHARS} characters, not {len(session_id):,}"
        raise InvalidMessageError(msg)
    if SIDE_STREAM_SEPARATOR in session_id:
        msg = (
            f"a session id may not contain {SIDE_STREAM_SEPARATOR!r} (it names side streams): {session_id!r}"
        )
        raise InvalidMessageError(msg)
    _check_storable(session_id, "a session id")
    return session_id


def check_list(value: object, what: str) -> Iterable[object]:
    """Return ``value`` if it is a list of items (not text, bytes or a mapping); else InvalidMessageError."""
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        msg = f"{what} must be a list, not {type(value).__name__}"
        raise InvalidMessageError(msg)
    return value


def check_session_fields(*, system_prompt: object, model: object, tools: object, metadata: object) -> None:
    """Refuse ill-typed session fields (``InvalidMessageError``): text, optional text, a list, a mapping."""
    if not isinstance(system_prompt, str):
        msg = f"system_prompt must be text (a string), not {type(system_prompt).__name__}"
        raise InvalidMessageError(msg)
    if model is not None and not isinstance(model, str):
        msg = f"model must be text (a string) or None, not {type(model).__name__}"
        raise InvalidMessageError(msg)
    check_list(tools, "tools")
    if metadata is not None and not isinstance(metadata, Mapping):
        msg = f"metadata must be a mapping, not {type(metadata).__name__}"
        raise InvalidMessageError(msg)


_STREAM_SUFFIX_CHARS = 64
"""Room past ``MAX_SESSION_ID_CHARS`` for a side stream's suffix (``::summaries``)."""


def check_stream_id(stream_id: object) -> str:
    """Return ``stream_id`` if it can name a stream: non-empty text of a bounded length (refused typed)."""
    if not isinstance(stream_id, str) or not stream_id:
        shown = repr(stream_id)
        msg = f"a session id must be non-empty text, not {type(stream_id).__name__} {shown[:80]}"
        raise InvalidMessageError(msg)
    if len(stream_id) > MAX_SESSION_ID_CHARS + _STREAM_SUFFIX_CHARS:
        msg = f"a session id may have at most {MAX_SESSION_ID_CHARS} characters, not {len(stream_id):,}"
        raise InvalidMessageError(msg)
    return stream_id


def check_position(value: object, what: str = "a position", *, optional: bool = False) -> int | None:
    """Return ``value`` if it is a log position or version (0 to ``MAX_STORED_INT``; None when ``optional``).

    A text, a float or a boolean is a caller's mistake: for an ``expected_version`` never a lost race
    (``ConcurrencyConflictError`` would send a retry loop around it).

    Raises:
        InvalidMessageError: text, a float, a boolean, a number out of range, or None when not ``optional``.
    """
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_STORED_INT:
        msg = f"{what} must be a whole number from 0 to {MAX_STORED_INT}, not {value!r}"
        raise InvalidMessageError(msg)
    return value


def check_idempotency_key(key: object) -> str | None:
    r"""Return ``key`` if it is a usable idempotency key (or None); raise ``InvalidMessageError`` if not.

    A key is non-empty text of at most ``MAX_IDEMPOTENCY_KEY_CHARS`` characters that encodes as UTF-8
    (a lone surrogate such as ``"\ud800"`` does not) and holds no NUL, so every store keeps it alike.
    """
    if key is None:
        return None
    if not isinstance(key, str):
        msg = f"an idempotency key must be text, not {type(key).__name__}"
        raise InvalidMessageError(msg)
    if not 1 <= len(key) <= MAX_IDEMPOTENCY_KEY_CHARS:
        msg = f"an idempotency key must have 1 to {MAX_IDEMPOTENCY_KEY_CHARS} characters, not {len(key)}"
        raise InvalidMessageError(msg)
    _check_storable(key, "an idempotency key")
    return key


def _check_storable(text: str, what: str) -> None:
    """Refuse text every store would not keep alike: not valid UTF-8 (a lone surrogate), or with NUL."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        msg = f"{what} must be valid UTF-8 text: {error.reason} at character {error.start}"
        raise InvalidMessageError(msg) from None
    if "\x00" in text:
        msg = f"{what} may not contain NUL (\\x00)"
        raise InvalidMessageError(msg)
