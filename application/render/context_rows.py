"""The context projection's row codec: a folded state without the log's own texts, read back from the log.

An entry's non-empty inline ``content`` and its ``tool_calls`` are always those of the event at
``entry.position`` (ingest and restore build them from that event), and the system prompt is the first
event's; only rendering reads them. A
row therefore stores such entries without them and lists their positions; decoding reads those
events back (one range read of the session) and puts them back. Rows take about a tenth of the
bytes the full state takes, so a rebuild writes far less than the log holds.
"""

from __future__ import annotations

import msgspec
from contextledger.application.kernel.ledger import Ledger
from contextledger.domain.content import InlineText
from contextledger.domain.errors import EventDecodeError
from contextledger.domain.events import AnyEvent, SessionStarted
from contextledger.projections.context import RenderedToolCall
from contextledger.projections.state import Entry, Group, RenderState, WorkingContext

__all__ = ["ContextRow", "decode_row", "encode_row", "row_state"]


class ContextRow(msgspec.Struct, array_like=True):
    """A folded state as a row stores it: sets sorted, so equal states give equal bytes."""

    state: RenderState
    summaries: list[str]
    tool_names: list[str]
    from_log: list[int] = msgspec.field(default_factory=list)
    """Positions whose entry content and tool calls were left out (they are the event's own)."""
    system_from_log: bool = False
    """The system prompt was left out (it is the session's first event's own)."""


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(ContextRow)


def encode_row(state: RenderState, summaries: set[str], tool_names: set[str]) -> bytes:
    """Return the row of a folded state: entries' inline contents and tool calls left out.

    An entry is left out in part when it has tool calls or a non-empty inline text; it keeps its
    content otherwise (a blob's address, an empty text). One pass over the entries (a rebuild
    encodes every session's window).
    """
    from_log: list[int] = []
    groups: list[Group] = []
    replace = msgspec.structs.replace
    for group in state.window.groups:
        entries: list[Entry] | None = None
        for i, entry in enumerate(group.entries):
            content = entry.content
            inline = isinstance(content, InlineText) and content.text != ""
            if inline or entry.tool_calls:
                if entries is None:
                    entries = list(group.entries[:i])
                from_log.append(entry.position)
                entries.append(replace(entry, content=None if inline else content, tool_calls=()))
            elif entries is not None:
                entries.append(entry)
        groups.append(group if entries is None else replace(group, entries=tuple(entries)))
    window: WorkingContext = replace(state.window, groups=groups)
    system = state.system != ""
    slim = replace(state, window=window, system="" if system else state.system)
    return _ENCODER.encode(ContextRow(slim, sorted(summaries), sorted(tool_names), from_log, system))


def _restored(session_id: str, entry: Entry, event: AnyEvent | None) -> Entry:
    content = entry.content
    if content is None:
        content = getattr(event, "content", None)
        if not isinstance(content, InlineText):
            msg = f"context row of {session_id!r} names event {entry.position}, which has no inline text"
            raise EventDecodeError(msg)
    calls = tuple(
        RenderedToolCall(id=c.id, name=c.name, arguments=c.arguments)
        for c in getattr(event, "tool_calls", ())
    )
    return msgspec.structs.replace(entry, content=content, tool_calls=calls)


def decode_row(ledger: Ledger, session_id: str, data: bytes) -> ContextRow:
    """Decode a row and put back, from the session's events, what it left out.

    Raises:
        EventDecodeError: the row does not decode (another format), or an event it names is
            missing or has no inline content.
    """
    try:
        row = _DECODER.decode(data)
    except msgspec.DecodeError as error:
        msg = f"context row of {session_id!r} does not decode ({error}): rebuild the version"
        raise EventDecodeError(msg) from error
    if not row.from_log and not row.system_from_log:
        return row
    wanted = set(row.from_log)  # in window order: a late tool result joins its call's earlier group
    first = 1 if row.system_from_log else min(wanted)
    last = max(wanted, default=1)
    events = {
        r.position: r.event
        for r in ledger.events(session_id, after=first - 1, upto=last)
        if r.position in wanted or r.position == 1
    }
    if row.system_from_log:
        started = events.get(1)
        if not isinstance(started, SessionStarted):
            msg = (
                f"context row of {session_id!r} takes its system prompt from a first event that is not there"
            )
            raise EventDecodeError(msg)
        row.state.system = started.system_prompt
        row.system_from_log = False
    groups: list[Group] = []
    for group in row.state.window.groups:
        if not any(e.position in wanted for e in group.entries):
            groups.append(group)
            continue
        entries = tuple(
            _restored(session_id, e, events.get(e.position)) if e.position in wanted else e
            for e in group.entries
        )
        groups.append(msgspec.structs.replace(group, entries=entries))
    row.state.window.groups = groups
    row.from_log = []
    return row


def row_state(ledger: Ledger, session_id: str, data: bytes) -> RenderState:
    """Return the render state a row holds, contents read back from the log."""
    return decode_row(ledger, session_id, data).state
