"""Boundary models of the append API: messages as callers send them, validated by pydantic."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

import pydantic
from contextledger.domain.errors import InvalidMessageError

__all__ = [
    "AssistantMessage",
    "Message",
    "ToolCallIn",
    "ToolResult",
    "ToolSchemaIn",
    "UserMessage",
    "parse_message",
]

_STRICT = pydantic.ConfigDict(extra="forbid", frozen=True)
Str = pydantic.StrictStr
"""Text fields accept only strings: no numbers, lists or content blocks coerced into text."""


class ToolCallIn(pydantic.BaseModel):
    """A tool call as the model issued it; ``arguments`` is JSON text or an object."""

    model_config = _STRICT

    id: Annotated[Str, pydantic.Field(min_length=1)]
    name: Annotated[Str, pydantic.Field(min_length=1)]
    arguments: Str | dict[str, Any] = "{}"


class ToolSchemaIn(pydantic.BaseModel):
    """A tool the model may call."""

    model_config = _STRICT

    name: Annotated[Str, pydantic.Field(min_length=1)]
    description: str = ""
    parameters: dict[str, Any] = pydantic.Field(default_factory=dict)


class UserMessage(pydantic.BaseModel):
    """Something the user said."""

    model_config = _STRICT

    role: Literal["user"] = "user"
    content: Str
    at: datetime | None = None
    meta: dict[str, Any] = pydantic.Field(default_factory=dict)


class AssistantMessage(pydantic.BaseModel):
    """The model's answer: text, optional reasoning, tool calls."""

    model_config = _STRICT

    role: Literal["assistant"] = "assistant"
    content: Str | None = None
    reasoning: Str | None = None
    tool_calls: tuple[ToolCallIn, ...] = ()
    model: str | None = None
    at: datetime | None = None
    meta: dict[str, Any] = pydantic.Field(default_factory=dict)


class ToolResult(pydantic.BaseModel):
    """The result of one tool call; ``tool_name`` defaults to the name of the call."""

    model_config = _STRICT

    role: Literal["tool"] = "tool"
    call_id: Annotated[Str, pydantic.Field(min_length=1)]
    content: Str
    tool_name: str | None = None
    is_error: pydantic.StrictBool = False
    at: datetime | None = None
    meta: dict[str, Any] = pydantic.Field(default_factory=dict)


Message = Annotated[UserMessage | AssistantMessage | ToolResult, pydantic.Field(discriminator="role")]
"""Any message the append API takes, told apart by ``role``."""

_ADAPTER: pydantic.TypeAdapter[UserMessage | AssistantMessage | ToolResult] = pydantic.TypeAdapter(Message)
_ROLES = ("user", "assistant", "tool")


def parse_message(
    raw: UserMessage | AssistantMessage | ToolResult | dict[str, Any],
) -> UserMessage | AssistantMessage | ToolResult:
    """Validate a message given as a model or a dict; raise ``InvalidMessageError`` on bad input."""
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
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'][1:]) or 'message'}: {_explain(e)}" for e in error.errors()
        )
        msg = f"invalid {role} message: {problems}"
        raise InvalidMessageError(msg) from None


def _explain(error: Any) -> str:
    if error["type"] in {"string_type", "str_type"}:
        return "must be text (a string); non-text content such as images or content blocks is not accepted"
    return str(error["msg"])
