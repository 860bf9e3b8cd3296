"""A page of stored events gathered by SQLite into a few values, decoded at once, read beside the fold.

A rebuild reads every stored event. Fetched row by row, ``sqlite3`` builds five Python objects per
row holding the GIL, and the mapper decodes each payload in a call of its own: all of it on the
thread that folds. Here SQLite itself joins a page's ids, streams, positions and topics into four
strings and its payloads into one blob, inside ``sqlite3_step``, which runs with the GIL released;
msgspec then decodes the payloads in one call. Run on a thread of its own (``scan_ahead`` of the
reader) while the caller folds the page before, the scan costs the folding thread only the decode
(ADR 0072).

Every page is checked before it is used: the counts of every list, the blob's length, the ids in
order, each event's type against its row's topic. A page that fails a check, or holds a topic the
batch decoder does not take (an older version, a tombstone), is read row by row instead, so what a
reader gets never depends on which path read it.
"""

from __future__ import annotations

from itertools import accumulate
from typing import NamedTuple, Protocol, runtime_checkable

from contextledger.adapters.store.mapper import MsgspecMapper
from contextledger.domain.ports import Notification, NotificationBatch

__all__ = ["SEPARATOR", "NotificationScan", "ScansPages", "batch_of", "joined_rows", "scan_sql"]

SEPARATOR = "\x1f"
"""Joins streams and topics (a stream id holding it fails the count check: that page is read by rows)."""


class NotificationScan(NamedTuple):
    """A page of stored events as SQLite gathered it (``scan_sql``); ``rows`` 0 when none is left."""

    rows: int
    last_id: int
    total: int
    """The payloads' summed length: the blob must have it."""
    ids: str
    streams: str
    positions: str
    topics: str
    states: bytes


@runtime_checkable
class ScansPages(Protocol):
    """Projection tables that gather a page of stored events in the database (SQLite's)."""

    def notification_scan(self, after: int, limit: int) -> NotificationScan:
        """Return up to ``limit`` stored events with notification ids above ``after``, gathered."""
        ...


def scan_sql(table: str) -> str:
    """The query of a page of ``table`` after ``?`` (at most ``?`` rows), each column joined in id order.

    The page is a subquery with ``ORDER BY rowid LIMIT``, which SQLite runs as a co-routine feeding the
    aggregates in its order (``batch_of`` checks that the ids came in order).
    """
    page = f"SELECT rowid, originator_id, originator_version, topic, state FROM {table}"  # noqa: S608
    return (
        "SELECT count(*), max(rowid), sum(length(state)), group_concat(rowid), "  # noqa: S608 - the recorder's table
        "group_concat(originator_id, char(31)), group_concat(originator_version), "
        "group_concat(topic, char(31)), CAST(group_concat(state, x'') AS BLOB) "
        f"FROM ({page} WHERE rowid > ? ORDER BY rowid LIMIT ?)"
    )


def batch_of(scan: NotificationScan, mapper: MsgspecMapper, skipped: str) -> NotificationBatch | None:
    """The page as notifications, or None when it must be read row by row.

    None when a check fails (counts, the blob's length, ids out of order), when a row's topic is
    ``skipped`` (a tombstone) or one the mapper's batch decoder does not take, or when the payloads do
    not decode as their topics say.
    """
    if not scan.rows:
        return NotificationBatch(0, [])
    ids = list(map(int, scan.ids.split(",")))
    streams = scan.streams.split(SEPARATOR)
    positions = list(map(int, scan.positions.split(",")))
    topics = scan.topics.split(SEPARATOR)
    count = scan.rows
    if not (len(ids) == len(streams) == len(positions) == len(topics) == count):
        return None
    if len(scan.states) != scan.total or ids != sorted(ids) or skipped in topics:
        return None
    events = mapper.decode_batch(topics, scan.states)
    if events is None:
        return None
    return NotificationBatch(scan.last_id, list(map(Notification, ids, streams, positions, events)))


def joined_rows(
    count: int, keys: str | None, positions: str | None, sizes: str | None, states: bytes | None
) -> dict[str, tuple[int, bytes]] | None:
    """Rows ``(key, position, state)`` that SQLite joined (keys by ``SEPARATOR``, states end to end), split.

    None when the parts do not agree (a key holding the separator): the caller reads the rows one by one.
    """
    if not count:
        return {}
    if keys is None or positions is None or sizes is None or states is None:
        return None
    names = keys.split(SEPARATOR)
    at = list(map(int, positions.split(",")))
    ends = list(accumulate(map(int, sizes.split(","))))
    if not (len(names) == len(at) == len(ends) == count) or ends[-1] != len(states):
        return None
    starts = [0, *ends[:-1]]
    return {
        name: (position, states[start:end])
        for name, position, start, end in zip(names, at, starts, ends, strict=True)
    }
