"""A model's streamed reply passed through to the caller event by event, and recorded when it ends."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, AbstractContextManager, nullcontext
from typing import Any

from contextledger.adapters.providers.streams import StreamAssembler
from contextledger.application.agent.agent_types import ToolCallRequest

__all__ = ["AsyncRecordedStream", "RecordedStream", "failure_text"]

Record = Callable[[dict[str, Any], float], list[ToolCallRequest]]
"""Records the assembled reply with its latency; returns the tool calls to run."""
Fail = Callable[[str, StreamAssembler], None]
"""Marks the call failed with the error's text and what arrived."""


def failure_text(error: BaseException) -> str:
    """The error a failed call is marked with: its type and message."""
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def _entered(stream: Any) -> AbstractContextManager[Any]:
    """A stream manager (``messages.stream(...)``: no ``__iter__``) is entered; a stream is used as is."""
    if hasattr(stream, "__enter__") and not hasattr(stream, "__iter__"):
        return stream  # type: ignore[no-any-return]
    return nullcontext(stream)


def _aentered(stream: Any) -> AbstractAsyncContextManager[Any]:
    if hasattr(stream, "__aenter__") and not hasattr(stream, "__aiter__"):
        return stream  # type: ignore[no-any-return]
    return nullcontext(stream)


class RecordedStream:
    """Iterate it like the SDK's stream: each event comes through unchanged.

    When the stream ends, the assembled reply and its usage are recorded (``record_response``) and
    ``tool_calls`` holds the calls to run. When it breaks off (an error, or the caller stops early),
    the call is marked failed with the text that had arrived, and the error is raised again.
    """

    def __init__(self, wire: str, stream: Any, record: Record, fail: Fail) -> None:
        self.assembler = StreamAssembler(wire)
        self.tool_calls: list[ToolCallRequest] = []
        self.reply: dict[str, Any] | None = None
        """The assembled reply (set once the stream has ended)."""
        self._stream = stream
        self._record = record
        self._fail = fail

    def __iter__(self) -> Iterator[Any]:
        """Yield the stream's events; record the reply at its end, or the failure."""
        started = time.monotonic()
        try:
            with _entered(self._stream) as events:
                for event in events:
                    self.assembler.add(event)
                    yield event
        except BaseException as error:  # an interrupted stream, or the caller stopped reading
            self._fail(failure_text(error), self.assembler)
            raise
        finally:
            close = getattr(self._stream, "close", None)
            if callable(close):
                close()
        self.reply = self.assembler.reply()
        self.tool_calls = self._record(self.reply, (time.monotonic() - started) * 1000)


class AsyncRecordedStream:
    """``RecordedStream`` for async SDK streams: ``async for event in agent.record_stream(...)``."""

    def __init__(
        self,
        wire: str,
        stream: Any,
        record: Callable[[dict[str, Any], float], Awaitable[list[ToolCallRequest]]],
        fail: Callable[[str, StreamAssembler], Awaitable[None]],
    ) -> None:
        self.assembler = StreamAssembler(wire)
        self.tool_calls: list[ToolCallRequest] = []
        self.reply: dict[str, Any] | None = None
        self._stream = stream
        self._record = record
        self._fail = fail

    async def __aiter__(self) -> AsyncIterator[Any]:
        """Yield the stream's events; record the reply at its end, or the failure."""
        started = time.monotonic()
        try:
            async with _aentered(self._stream) as events:
                async for event in events:
                    self.assembler.add(event)
                    yield event
        except BaseException as error:
            await self._fail(failure_text(error), self.assembler)
            raise
        finally:
            close = getattr(self._stream, "close", None)
            if callable(close):
                await close()
        self.reply = self.assembler.reply()
        self.tool_calls = await self._record(self.reply, (time.monotonic() - started) * 1000)
