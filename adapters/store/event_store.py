"""The ``EventStore`` port on an eventsourcing recorder, with driver errors mapped into the tree."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from functools import partial
from typing import Protocol

from contextledger.adapters.store.batch import Extras, insert_gathered
from contextledger.adapters.store.guards import refuse_nul, refuse_nul_in, storable, translated
from contextledger.adapters.store.mapper import MsgspecMapper, Row
from contextledger.adapters.store.sealing import TOMBSTONE_TOPIC, Sealer
from contextledger.application.kernel.logs import get_logger
from contextledger.domain.errors import (
    ConcurrencyConflictError,
    ContextLedgerError,
    SessionForgottenError,
    StoreError,
)
from contextledger.domain.events import AnyEvent, Recorded, SessionForgotten, SessionStarted
from contextledger.domain.ports import AppendOutcome, SessionInfo, StreamAppend
from eventsourcing.persistence import (
    ApplicationRecorder,
    Cipher,
    IntegrityError,
    Notification,
    StoredEvent,
)

__all__ = ["LedgerRecorder", "RecorderEventStore"]

log = get_logger(__name__)

_PAGE = 1000


class LedgerRecorder(Protocol):
    """What the store needs of a recorder beyond eventsourcing's ``ApplicationRecorder``."""

    def read_blob(self, sha256: str) -> str | None:
        """Return a blob's text."""
        ...

    def lookup_idempotency(self, stream_id: str, key: str) -> tuple[int, int] | None:
        """Return the positions stored under an idempotency key."""
        ...

    def load_token_counts(self, tokenizer: str, keys: Sequence[str]) -> dict[str, int]:
        """Return cached token counts."""
        ...

    def save_token_counts(self, tokenizer: str, counts: Mapping[str, int]) -> None:
        """Store token counts."""
        ...

    @property
    def writes_aside(self) -> bool:
        """Whether a write may run on another thread while this one reads (readers never wait for it)."""
        ...

    def stream_versions(self, stream_ids: Iterable[str]) -> dict[str, int]:
        """Return the last position of each stream."""
        ...

    def session_starts(self, start: int, limit: int) -> Sequence[Notification]:
        """Return up to ``limit`` session-start events from notification id ``start``, in order."""
        ...

    def load_snapshot(self, name: str) -> tuple[int, bytes] | None:
        """Return a projection snapshot."""
        ...

    def save_snapshot(self, name: str, position: int, state: bytes) -> None:
        """Store a projection snapshot."""
        ...


class RecorderEventStore:
    """Session streams stored through an eventsourcing ``ApplicationRecorder``.

    The recorder's primary key ``(originator_id, originator_version)`` is the optimistic
    concurrency check; blobs and the idempotency key ride in the same transaction.
    """

    def __init__(
        self,
        recorder: ApplicationRecorder,
        *,
        url: str,
        mapper: MsgspecMapper | None = None,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        """Wrap ``recorder`` (``MemoryRecorder``, ``SQLiteRecorder`` or ``PostgresRecorder``)."""
        self.recorder = recorder
        self.extras: LedgerRecorder = recorder  # type: ignore[assignment]  # the three recorders of this package
        self.url = url
        self.mapper = mapper or MsgspecMapper()
        self._on_close = on_close
        self._turns = threading.local()
        """Per thread: the streams whose writer turn it holds (a nested turn on one of them is a no-op)."""
        self.sealer: Sealer | None = None
        """Set when the ledger is encrypted (``encrypt_with``): every stored text passes through it."""

    def encrypt_with(self, sealer: Sealer) -> None:
        """Seal every write and open every read with ``sealer`` (checks the key first).

        Raises:
            LedgerKeyError: the ledger is encrypted under another key, or holds plaintext events.
        """
        with translated("check the ledger's key"):
            sealer.check_key(bool(self.recorder.max_notification_id()))
        self.sealer = sealer
        self.mapper.unseal = sealer.open_event

    def append(
        self,
        stream_id: str,
        expected_version: int,
        events: Sequence[AnyEvent],
        *,
        blobs: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
        snapshot: tuple[str, int, bytes] | None = None,
    ) -> AppendOutcome:
        """Append ``events`` after ``expected_version`` atomically, with their blobs.

        ``snapshot`` (a derived ``(name, position, state)``) joins the transaction when the recorder
        writes snapshots with events (``WRITES_SNAPSHOTS``, SQLite); otherwise it is saved after a stored
        append, as ``save_snapshot`` would, and a failure to save it is logged.
        """
        if not events:
            return AppendOutcome(())
        refuse_nul_in(stream_id, idempotency_key, snapshot)
        first = expected_version + 1
        last = expected_version + len(events)
        idempotency = [] if idempotency_key is None else [(stream_id, idempotency_key, first, last)]
        insert_rows: Callable[..., object] | None = getattr(self.recorder, "insert_rows", None)
        insert: Callable[..., object] = self.recorder.insert_events
        stored: Sequence[Row] | Sequence[StoredEvent]
        created: dict[str, Cipher] = {}
        if self.sealer is None and insert_rows is not None:  # SQLite in plaintext: rows, no StoredEvent
            insert, stored, rows = insert_rows, self._encode_rows(stream_id, first, events), dict(blobs or {})
        elif self.sealer is None:  # ``_sealed``'s plaintext answer, without the call and the heads
            stored, rows = self._encode(stream_id, first, events), dict(blobs or {})
        else:
            stored, rows, idempotency, created = self._sealed(
                self._encode(stream_id, first, events), {stream_id: expected_version}, blobs, idempotency
            )
        joined = snapshot is not None and getattr(self.recorder, "WRITES_SNAPSHOTS", False)
        extras: dict[str, object] = {"blobs": rows, "idempotency": idempotency}
        if joined and snapshot is not None:
            extras["snapshots"] = [(snapshot[0], snapshot[1], self._sealed_bytes(snapshot[2]))]
        with translated(f"append to {stream_id!r}"):
            try:
                insert(stored, **extras)
            except IntegrityError as error:
                if idempotency_key is not None:
                    earlier = self.extras.lookup_idempotency(stream_id, self._index(idempotency_key))
                    if earlier is not None:
                        return AppendOutcome(tuple(range(earlier[0], earlier[1] + 1)), replayed=True)
                log.info("append_conflict", stream_id=stream_id, expected_version=expected_version)
                raise ConcurrencyConflictError(stream_id, expected_version) from error
        if self.sealer is not None:
            self.sealer.remember(created)
        if snapshot is not None and not joined:
            self._save_derived(*snapshot)
        return AppendOutcome(tuple(range(first, last + 1)))

    def _save_derived(self, name: str, position: int, state: bytes) -> None:
        """Save a derived snapshot after the append it follows: a failure is logged, never raised."""
        try:
            self.save_snapshot(name, position, state)
        except ContextLedgerError as error:
            log.warning("snapshot_not_saved", name=name, error=str(error))

    def _sealed(
        self,
        stored: list[StoredEvent],
        heads: Mapping[str, int],
        blobs: Mapping[str, str] | None,
        keys: list[tuple[str, str, int, int]],
    ) -> tuple[list[StoredEvent], dict[str, str], list[tuple[str, str, int, int]], dict[str, Cipher]]:
        """The rows as stored: sealed when the ledger is encrypted (``created``: new session data keys)."""
        if self.sealer is None:
            return stored, dict(blobs or {}), keys, {}
        rows = self.sealer.seal_blobs(blobs or {})
        sealed, created = self.sealer.seal_events(stored, heads, rows)
        return sealed, rows, [(s, self._index(k), a, b) for s, k, a, b in keys], created

    def _index(self, name: str) -> str:
        """A lookup key as stored (a keyed HMAC when the ledger is encrypted)."""
        return name if self.sealer is None else self.sealer.keyring.index(name)

    def append_streams(
        self, appends: Sequence[StreamAppend], *, blobs: Mapping[str, str] | None = None
    ) -> None:
        """Append to several streams in one transaction: all of it is stored, or none of it."""
        refuse_nul([a.stream_id for a in appends], [a.idempotency_key for a in appends])
        stored: list[StoredEvent] = []
        keys: list[tuple[str, str, int, int]] = []
        for append in appends:
            first = append.expected_version + 1
            stored.extend(self._encode(append.stream_id, first, append.events))
            if append.idempotency_key is not None:
                keys.append((append.stream_id, append.idempotency_key, first, first + len(append.events) - 1))
        if not stored:
            return
        heads = {a.stream_id: a.expected_version for a in appends}
        stored, rows, keys, created = self._sealed(stored, heads, blobs, keys)
        with translated(f"append to {len(appends)} streams"):
            try:
                self.recorder.insert_events(stored, blobs=rows, idempotency=keys)
            except IntegrityError as error:
                log.info("batch_append_conflict", streams=[a.stream_id for a in appends])
                first_stream = appends[0]
                raise ConcurrencyConflictError(
                    first_stream.stream_id, first_stream.expected_version
                ) from error
        if self.sealer is not None:
            self.sealer.remember(created)

    def append_streamed(self, items: Iterable[tuple[StreamAppend, Mapping[str, str]]]) -> None:
        """Append stream by stream as ``items`` are drawn, all in one transaction (ADR 0041).

        A recorder with ``insert_event_batches`` (SQLite) writes each append before the next is drawn;
        another gathers every item, then appends them with one ``append_streams``.
        """
        insert_batches: Callable[[Iterable[tuple[list[StoredEvent], Extras]]], None] | None = getattr(
            self.recorder, "insert_event_batches", None
        )
        if insert_batches is None:
            insert_batches = partial(insert_gathered, self.recorder.insert_events)
        created: dict[str, Cipher] = {}
        current: list[StreamAppend] = []

        def batches() -> Iterator[tuple[list[StoredEvent], Extras]]:
            for append, blobs in items:
                refuse_nul([append.stream_id], [append.idempotency_key])
                current[:] = [append]
                first = append.expected_version + 1
                stored = self._encode(append.stream_id, first, append.events)
                if not stored:
                    continue
                keys = [] if append.idempotency_key is None else [
                    (append.stream_id, append.idempotency_key, first, first + len(stored) - 1)
                ]  # fmt: skip
                heads = {append.stream_id: append.expected_version}
                stored, rows, keys, made = self._sealed(stored, heads, blobs, keys)
                created.update(made)
                yield stored, {"blobs": rows, "idempotency": keys}

        with translated("append streamed"):
            try:
                insert_batches(batches())
            except IntegrityError as error:
                stream = current[0] if current else None
                log.info("streamed_append_conflict", stream=stream and stream.stream_id)
                raise ConcurrencyConflictError(
                    stream.stream_id if stream else "", stream.expected_version if stream else 0
                ) from error
        if self.sealer is not None:
            self.sealer.remember(created)

    def _encode(self, stream_id: str, first: int, events: Sequence[AnyEvent]) -> list[StoredEvent]:
        """Encode a stream's events from position ``first`` before any write (bad values: the caller's)."""
        with storable():
            return self.mapper.to_stored_many(stream_id, first, events)

    def _encode_rows(self, stream_id: str, first: int, events: Sequence[AnyEvent]) -> list[Row]:
        """``_encode`` as ``(stream, position, topic, state)`` rows (``MsgspecMapper.rows_many``)."""
        with storable():
            return self.mapper.rows_many(stream_id, first, events)

    def read(self, stream_id: str, *, after: int = 0, upto: int | None = None) -> list[Recorded]:
        """Return the stream's events with positions in ``(after, upto]``."""
        if "\x00" in stream_id:
            return []  # no stream can be named so (appends refuse it)
        with translated(f"read {stream_id!r}"):
            rows = self.recorder.select_events(stream_id, gt=after or None, lte=upto)
        if self.sealer is not None and rows and rows[-1].topic == TOMBSTONE_TOPIC:
            raise self.forgotten_error(stream_id)
        try:
            return [self.mapper.to_recorded(row) for row in rows]
        except SessionForgottenError as error:
            raise self.forgotten_error(error.session_id) from None

    def forget(self, session_id: str, tombstone: SessionForgotten) -> SessionForgotten:
        """Erase a session of an encrypted ledger for good, leaving ``tombstone`` (``forgetting.py``)."""
        from contextledger.adapters.store.forgetting import forget_session  # noqa: PLC0415 - it imports this module

        return forget_session(self, session_id, tombstone)

    def forgotten_error(self, session_id: str) -> SessionForgottenError:
        """The error of a forgotten session, naming who forgot it, when and why (from its tombstone)."""
        with translated(f"read the tombstone of {session_id!r}"):
            rows = self.recorder.select_events(session_id, desc=True, limit=1)
        if rows and self.sealer is not None:
            event = self.mapper.to_recorded(rows[0]).event
            if isinstance(event, SessionForgotten):
                return SessionForgottenError(session_id, f"by {event.by} at {event.at}: {event.reason}")
        return SessionForgottenError(session_id)

    def version(self, stream_id: str) -> int:
        """Return the last position of the stream, 0 when it is empty."""
        if "\x00" in stream_id:
            return 0
        with translated(f"version of {stream_id!r}"):
            rows = self.recorder.select_events(stream_id, desc=True, limit=1)
        return rows[0].originator_version if rows else 0

    def versions(self, stream_ids: Sequence[str]) -> dict[str, int]:
        """Return the last position of each stream (0 when it is empty), in one query."""
        with translated("versions of streams"):
            found = self.extras.stream_versions([s for s in stream_ids if "\x00" not in s])
        return {stream_id: found.get(stream_id, 0) for stream_id in stream_ids}

    def sessions(self) -> list[SessionInfo]:
        """Return every started session in the order they were stored."""
        started: list[SessionStarted] = []
        with translated("list sessions"):
            start = 1
            while True:
                page = self.extras.session_starts(start, _PAGE)
                for row in page:
                    try:
                        event = self.mapper.to_recorded(row).event
                    except SessionForgottenError:
                        continue  # a forgotten session is listed no more
                    if isinstance(event, SessionStarted):
                        started.append(event)
                if len(page) < _PAGE:
                    break
                start = page[-1].id + 1
            versions = self.extras.stream_versions([s.session_id for s in started])
        return [
            SessionInfo(
                session_id=s.session_id,
                events=versions.get(s.session_id, 0),
                model=s.model,
                started_at=s.at,
                source=str(s.metadata.get("source_format")) if "source_format" in s.metadata else None,
                parent=s.parent,
            )
            for s in started
        ]

    def read_blob(self, sha256: str) -> str:
        """Return the text stored under ``sha256``."""
        with translated(f"read blob {sha256[:12]}"):
            text = self.extras.read_blob(self._index(sha256))
        if text is None:
            msg = f"blob {sha256} is missing from the store"
            raise StoreError(msg)
        return text if self.sealer is None else self.sealer.open_blob(text)

    def lookup_idempotency_key(self, stream_id: str, key: str) -> tuple[int, ...] | None:
        """Return the positions an earlier append with ``key`` stored, or None."""
        if "\x00" in stream_id + key:
            return None
        with translated(f"look up idempotency key of {stream_id!r}"):
            found = self.extras.lookup_idempotency(stream_id, self._index(key))
        return None if found is None else tuple(range(found[0], found[1] + 1))

    @contextmanager
    def writer_turn(self, stream_id: str) -> Iterator[None]:
        """Hold the stream's writer turn (PostgreSQL: an advisory lock; memory and SQLite: nothing)."""
        take: Callable[[str], AbstractContextManager[None]] | None = getattr(
            self.recorder, "stream_lock", None
        )
        held: set[str] = self._turns.__dict__.setdefault("held", set())
        if take is None or "\x00" in stream_id or stream_id in held:
            yield  # no lock to take, or this thread holds it already (a nested write)
            return
        with translated(f"writer turn of {stream_id!r}"), take(stream_id):
            held.add(stream_id)
            try:
                yield
            finally:
                held.discard(stream_id)

    def load_token_counts(self, tokenizer: str, keys: Iterable[str]) -> dict[str, int]:
        """Return cached token counts of content hashes."""
        wanted = {self._index(key): key for key in keys}
        with translated("load token counts"):
            found = self.extras.load_token_counts(tokenizer, list(wanted))
        return {wanted[key]: count for key, count in found.items()}

    @property
    def writes_aside(self) -> bool:
        """Whether counts may be saved on another thread while this one reads (SQLite files, PostgreSQL)."""
        return self.extras.writes_aside

    def save_token_counts(self, tokenizer: str, counts: Mapping[str, int]) -> None:
        """Cache token counts of content hashes."""
        if counts:
            with translated("save token counts"):
                keyed = counts if self.sealer is None else {self._index(k): v for k, v in counts.items()}
                self.extras.save_token_counts(tokenizer, keyed)

    def load_snapshot(self, name: str) -> tuple[int, bytes] | None:
        """Return the position and bytes of a projection snapshot, or None."""
        if "\x00" in name:
            return None
        with translated(f"load snapshot {name}"):
            found = self.extras.load_snapshot(name)
        if found is None or self.sealer is None:
            return found
        state = self.sealer.open_bytes(found[1])
        return None if state is None else (found[0], state)  # derived: unreadable means rebuilt

    def save_snapshot(self, name: str, position: int, state: bytes) -> None:
        """Store (replace) a projection snapshot."""
        refuse_nul([name], [])
        with translated(f"save snapshot {name}"):
            self.extras.save_snapshot(name, position, self._sealed_bytes(state))

    def _sealed_bytes(self, state: bytes) -> bytes:
        """A snapshot's bytes as stored (sealed when the ledger is encrypted)."""
        return state if self.sealer is None else self.sealer.seal_bytes(state)

    def close(self) -> None:
        """Release the connections of the underlying datastore."""
        if self._on_close is not None:
            self._on_close()
