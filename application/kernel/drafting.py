"""Turns validated boundary messages into domain events, moving large texts into blobs."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, TypeVar

import msgspec
import pydantic
from contextledger.application.kernel.messages import (
    AssistantMessage,
    MediaIn,
    PlainMessage,
    ToolCallIn,
    ToolResult,
    ToolSchemaIn,
    UserMessage,
)
from contextledger.application.kernel.wire_shapes import ledger_tool_call, ledger_tool_schema
from contextledger.domain.content import (
    PREVIEW_CHARS,
    BlobText,
    InlineText,
    MediaPart,
    Text,
    content_address,
)
from contextledger.domain.errors import InvalidMessageError
from contextledger.domain.events import (
    TIME_KEY,
    TIME_UNKNOWN,
    AnyEvent,
    AssistantMessageAdded,
    ToolCall,
    ToolResultRecorded,
    ToolSchema,
    UserMessageAdded,
)
from contextledger.domain.ports import Clock
from contextledger.domain.session import SessionState
from contextledger.projections.media import image_size, pdf_pages

__all__ = ["EventDrafter", "tool_call", "tool_schema"]

_MAX_UTF8_BYTES = 4
"""The most bytes one character takes in UTF-8."""


class EventDrafter:
    """Builds the events of an append: stamps times from the clock and stores large texts apart.

    Args:
        clock: Where ``at`` comes from when a message carries none.
        blob_threshold: Texts larger than this many UTF-8 bytes become content-addressed blobs.
    """

    def __init__(self, clock: Clock, blob_threshold: int) -> None:
        self.clock = clock
        self.blob_threshold = blob_threshold

    def events(
        self,
        messages: Iterable[UserMessage | AssistantMessage | ToolResult | PlainMessage],
        state: SessionState,
        issued: dict[str, str],
        blobs: dict[str, str],
    ) -> list[AnyEvent]:
        """``[self.event(m, state, issued, blobs) for m in messages]``, a batch's events in order.

        A plain user message whose text is inline however it encodes (``text``'s first test) is drafted
        here without the calls ``event`` makes for it: the same event (its own clock reading, a new
        empty ``meta``, no media), in the same order of clock readings.
        """
        now = self.clock.now
        short = self.blob_threshold // _MAX_UTF8_BYTES  # len(text) * 4 <= threshold, in integers
        drafted: list[AnyEvent] = []
        add = drafted.append
        for message in messages:
            if type(message) is tuple and message[0] == "user" and len(message[1]) <= short:
                add(UserMessageAdded(content=InlineText(message[1]), at=now(), meta={}))
            else:
                add(self.event(message, state, issued, blobs))
        return drafted

    def event(
        self,
        message: UserMessage | AssistantMessage | ToolResult | PlainMessage,
        state: SessionState,
        issued: dict[str, str],
        blobs: dict[str, str],
    ) -> AnyEvent:
        """Return the event for ``message``; ``issued`` collects call ids issued earlier in the batch.

        A ``PlainMessage`` (``messages.plain_message``) gives the event of its model (``plain_model``):
        every field it does not name is at the model's default (no time, media, tool name; empty meta).
        """
        if isinstance(message, tuple):
            role, content, call_id = message
            meta: dict[str, Any] = {}
            if role == "user":
                return self._user(content, (), self._time(None, meta), meta, blobs)
            at = self._time(None, meta)
            return self._result(call_id, content, None, at=at, meta=meta, known=(state, issued), blobs=blobs)
        at = self._time(message.at, message.meta)
        if isinstance(message, UserMessage):
            return self._user(message.content, message.media, at, message.meta, blobs)
        if isinstance(message, AssistantMessage):
            calls = tuple(
                ToolCall(id=c.id, name=c.name, arguments=_arguments_json(c.arguments))
                for c in message.tool_calls
            )
            issued.update({c.id: c.name for c in calls})
            return AssistantMessageAdded(
                content=None if message.content is None else self.text(message.content, blobs),
                reasoning=message.reasoning,
                reasoning_signature=message.reasoning_signature,
                tool_calls=calls,
                model=message.model,
                at=at,
                meta=message.meta,
            )
        return self._result(
            message.call_id,
            message.content,
            message.tool_name,
            is_error=message.is_error,
            at=at,
            meta=message.meta,
            known=(state, issued),
            blobs=blobs,
        )

    def _time(self, at: datetime | None, meta: Mapping[str, Any]) -> datetime | None:
        """The time of a message: its own, else now (a live append), unless its meta marks it unknown."""
        if at is None and meta.get(TIME_KEY) != TIME_UNKNOWN:
            return self.clock.now()
        return at

    def _user(
        self,
        content: str,
        media: tuple[MediaIn, ...],
        at: datetime | None,
        meta: dict[str, Any],
        blobs: dict[str, str],
    ) -> UserMessageAdded:
        """A user message: its text and media parts stored like texts (blobs when large)."""
        return UserMessageAdded(
            content=self.text(content, blobs),
            media=tuple(self.media(part, len(content), blobs) for part in media) if media else (),
            at=at,
            meta=meta,
        )

    def _result(
        self,
        call_id: str,
        content: str,
        tool_name: str | None,
        *,
        is_error: bool = False,
        at: datetime | None,
        meta: dict[str, Any],
        known: tuple[SessionState, dict[str, str]],
        blobs: dict[str, str],
    ) -> ToolResultRecorded:
        """A tool result; with no name given, the name of its call (issued in the batch, or before)."""
        state, issued = known
        return ToolResultRecorded(
            call_id=call_id,
            tool_name=tool_name or issued.get(call_id) or state.calls.name_of(call_id) or "",
            content=self.text(content, blobs),
            is_error=is_error,
            at=at,
            meta=meta,
        )

    def media(self, part: MediaIn, chars: int, blobs: dict[str, str]) -> MediaPart:
        """Return a media part with its data stored like a text (a blob when large) and its size read."""
        if part.offset > chars:
            msg = f"a media part's offset ({part.offset}) is past the end of its message text ({chars})"
            raise InvalidMessageError(msg)
        size = image_size(part.data) if part.kind == "image" and part.source == "base64" else None
        pages = pdf_pages(part.data) if part.kind == "file" and part.source == "base64" else None
        return MediaPart(
            kind=part.kind,
            source=part.source,
            data=self.text(part.data, blobs),
            sha256=content_address(part.data),
            media_type=part.media_type,
            detail=part.detail,
            filename=part.filename,
            width=size[0] if size else None,
            height=size[1] if size else None,
            pages=pages,
            offset=part.offset,
        )

    def text(self, text: str, blobs: dict[str, str]) -> Text:
        """Return inline text, or a blob reference (adding the blob to ``blobs``) when it is large."""
        if len(text) * _MAX_UTF8_BYTES <= self.blob_threshold:
            return InlineText(
                text
            )  # a short text is inline whatever its characters: it cannot pass the threshold
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError as error:  # an inline text is refused by the store's encoder; a blob, here
            msg = f"a message text must be valid UTF-8: {error.reason} at character {error.start}"
            raise InvalidMessageError(msg) from None
        if size <= self.blob_threshold:
            return InlineText(text)
        sha = content_address(text)
        blobs[sha] = text
        return BlobText(sha256=sha, chars=len(text), preview=text[:PREVIEW_CHARS])


def tool_schema(raw: object) -> ToolSchema:
    """Validate a tool schema given as a model or a mapping, in the ledger's or a provider's shape."""
    if not isinstance(raw, ToolSchemaIn | Mapping):
        msg = f"a tool schema must be a mapping or a ToolSchemaIn, not {type(raw).__name__}"
        raise InvalidMessageError(msg)
    schema = (
        raw
        if isinstance(raw, ToolSchemaIn)
        else _validated(ToolSchemaIn, ledger_tool_schema(raw), "tool schema")
    )
    strict = msgspec.UNSET if schema.strict is None else schema.strict
    return ToolSchema(
        name=schema.name, description=schema.description, parameters=dict(schema.parameters), strict=strict
    )


def tool_call(raw: object) -> ToolCallIn:
    """Validate a tool call given as a model or a mapping, in the ledger's or a provider's shape."""
    if not isinstance(raw, ToolCallIn | Mapping):
        msg = f"a tool call must be a mapping or a ToolCallIn, not {type(raw).__name__}"
        raise InvalidMessageError(msg)
    return raw if isinstance(raw, ToolCallIn) else _validated(ToolCallIn, ledger_tool_call(raw), "tool call")


_M = TypeVar("_M", ToolSchemaIn, ToolCallIn)


def _validated(model: type[_M], raw: Mapping[str, Any], what: str) -> _M:
    try:
        return model.model_validate(dict(raw))
    except pydantic.ValidationError as error:
        msg = f"invalid {what}: {error.errors()[0]['msg']} at {error.errors()[0]['loc']}"
        raise InvalidMessageError(msg) from None


def _arguments_json(arguments: str | dict[str, Any]) -> str:
    if isinstance(arguments, str):
        return arguments
    try:
        return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as error:
        msg = f"tool call arguments must be JSON (strings, numbers, lists, objects): {error}"
        raise InvalidMessageError(msg) from None
