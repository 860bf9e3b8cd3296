"""The event-store contract, written once and run against memory, SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path

import contextledger
import psycopg
import pytest
from contextledger.adapters.store.event_store import RecorderEventStore
from contextledger.domain.content import BlobText, InlineText
from contextledger.domain.events import SessionStarted, UserMessageAdded
from contextledger.domain.ports import StreamAppend


class EventStoreContract(ABC):
    """Behaviour every backend must show; subclasses say how to open one and how to snapshot it."""

    @pytest.fixture
    @abstractmethod
    def url(self) -> str:
        """The URL of a fresh, empty store."""

    @abstractmethod
    def snapshot(self, ledger: contextledger.Ledger) -> object:
        """Return everything the store holds, to compare before and after a rejected write."""

    @pytest.fixture
    def ledger(self, url: str) -> Iterator[contextledger.Ledger]:
        """A ledger on this backend."""
        with contextledger.open_ledger(url) as opened:
            yield opened

    def _session(self, ledger: contextledger.Ledger) -> str:
        session_id = ledger.start_session(system_prompt="You are terse.", model="m")
        ledger.add_user_message(session_id, "list the files")
        ledger.add_assistant_message(
            session_id, "sure", tool_calls=[{"id": "c1", "name": "ls", "arguments": {"path": "."}}]
        )
        return session_id

    def test_events_read_back_in_order_with_positions(self, ledger):
        """Appended events come back typed, in order, numbered from 1."""
        session_id = self._session(ledger)
        ledger.add_tool_result(session_id, "c1", "a.py\nb.py")
        events = ledger.events(session_id)
        assert [r.position for r in events] == [1, 2, 3, 4]
        assert [type(r.event).__name__ for r in events] == [
            "SessionStarted",
            "UserMessageAdded",
            "AssistantMessageAdded",
            "ToolResultRecorded",
        ]
        assert events[3].event.tool_name == "ls"
        assert ledger.events(session_id, after=2, upto=3)[0].position == 3

    def test_sessions_lists_every_session_with_event_counts(self, ledger):
        """The session list names each started session and how many events it holds."""
        first = self._session(ledger)
        second = ledger.start_session(model="other")
        counts = {s.session_id: s.events for s in ledger.sessions()}
        assert counts == {first: 3, second: 1}

    def test_large_content_is_stored_once_outside_the_event(self, ledger):
        """A large result is a content-addressed blob: the event holds only its reference."""
        session_id = self._session(ledger)
        big = "line of output\n" * 5000
        ledger.add_tool_result(session_id, "c1", big)
        event = ledger.events(session_id)[-1].event
        assert isinstance(event.content, BlobText)
        assert event.content.chars == len(big)
        assert ledger.text(event.content) == big

    def test_small_content_stays_inline(self, ledger):
        """Ordinary messages keep their text inside the event."""
        session_id = self._session(ledger)
        assert ledger.events(session_id)[1].event.content == InlineText("list the files")

    def test_conflicting_append_raises_typed_conflict_and_writes_nothing(self, ledger):
        """Of two writers on one version, the second gets ConcurrencyConflictError."""
        session_id = self._session(ledger)
        version = ledger.version(session_id)
        if ledger.store_url == "memory://":
            ledger.add_user_message(session_id, "writer one", expected_version=version)
        else:
            with contextledger.open_ledger(ledger.store_url) as other:
                other.add_user_message(session_id, "writer one", expected_version=version)
        with pytest.raises(contextledger.ConcurrencyConflictError, match="another writer won"):
            ledger.add_user_message(session_id, "writer two", expected_version=version)
        texts = [r.event.content for r in ledger.events(session_id) if isinstance(r.event, UserMessageAdded)]
        assert InlineText("writer two") not in texts

    def test_store_level_conflict_is_typed(self, ledger):
        """The store itself maps a primary-key clash to ConcurrencyConflictError."""
        session_id = self._session(ledger)
        event = UserMessageAdded(content=InlineText("late"))
        with pytest.raises(contextledger.ConcurrencyConflictError):
            ledger.ports.log.append(session_id, 1, [event])

    def test_an_append_ahead_of_the_head_is_refused_and_leaves_no_gap(self, ledger):
        """A writer that believes the stream is further along than it is cannot skip positions."""
        session_id = self._session(ledger)
        before = self.snapshot(ledger)
        with pytest.raises(contextledger.ConcurrencyConflictError):
            ledger.ports.log.append(session_id, 10, [UserMessageAdded(content=InlineText("from the future"))])
        assert self.snapshot(ledger) == before
        assert [r.position for r in ledger.events(session_id)] == [1, 2, 3]

    def test_retried_append_with_same_key_stores_one_event(self, ledger):
        """An idempotency key makes the retry a no-op that returns the first positions."""
        session_id = self._session(ledger)
        first = ledger.add_user_message(session_id, "once", idempotency_key="req-42")
        second = ledger.add_user_message(session_id, "once", idempotency_key="req-42")
        assert first == second == 4
        assert ledger.version(session_id) == 4

    def test_idempotency_key_is_honoured_by_a_fresh_process(self, ledger):
        """A retry from a ledger that never saw the first append is still a no-op."""
        session_id = self._session(ledger)
        ledger.add_user_message(session_id, "once", idempotency_key="req-7")
        if ledger.store_url == "memory://":
            other_store = ledger.ports.log
        else:
            other_store = contextledger.open_ledger(ledger.store_url).ports.log
        outcome = other_store.append(
            session_id, 4, [UserMessageAdded(content=InlineText("once"))], idempotency_key="req-7"
        )
        assert outcome.replayed
        assert outcome.positions == (4,)
        assert ledger.version(session_id) == 4

    @pytest.mark.parametrize(
        "bad",
        [
            {"role": "tool", "call_id": "never-issued", "content": "x"},
            {"role": "wizard", "content": "x"},
            {"role": "user", "content": [{"type": "image", "source": "..."}]},
            {"role": "user"},
            {"role": "assistant", "tool_calls": [{"id": "c1", "name": "ls"}]},
        ],
        ids=["unknown-call", "unknown-role", "non-text", "missing-content", "reused-call-id"],
    )
    def test_bad_append_leaves_store_unchanged(self, ledger, bad):
        """A rejected append raises a typed ValidationError and the store is byte-for-byte unchanged."""
        session_id = self._session(ledger)
        before = self.snapshot(ledger)
        with pytest.raises(contextledger.ValidationError):
            ledger.append(session_id, bad)
        assert self.snapshot(ledger) == before

    def test_bad_message_in_a_batch_writes_none_of_the_batch(self, ledger):
        """A batch with one bad message stores none of its messages."""
        session_id = self._session(ledger)
        before = self.snapshot(ledger)
        with pytest.raises(contextledger.UnknownToolCallError):
            ledger.append_many(
                session_id,
                [
                    {"role": "tool", "call_id": "c1", "content": "ok"},
                    {"role": "tool", "call_id": "c9", "content": "x"},
                ],
            )
        assert self.snapshot(ledger) == before

    def test_missing_session_is_a_typed_error(self, ledger):
        """Appending to or reading a session that does not exist raises SessionNotFoundError."""
        with pytest.raises(contextledger.SessionNotFoundError):
            ledger.add_user_message("nope", "hello")
        with pytest.raises(contextledger.SessionNotFoundError):
            ledger.events("nope")

    def test_second_result_for_a_call_is_refused(self, ledger):
        """A call gets exactly one result."""
        session_id = self._session(ledger)
        ledger.add_tool_result(session_id, "c1", "first")
        with pytest.raises(contextledger.DuplicateToolResultError):
            ledger.add_tool_result(session_id, "c1", "second")

    def test_starting_an_existing_session_is_refused(self, ledger):
        """Session ids are unique."""
        session_id = self._session(ledger)
        with pytest.raises(contextledger.SessionExistsError):
            ledger.start_session(session_id=session_id)

    def test_concurrent_writers_never_interleave_a_version(self, ledger):
        """Threads racing on one session each either win a version or get a typed conflict."""
        session_id = self._session(ledger)
        version = ledger.version(session_id)
        outcomes: list[str] = []

        def write(n: int) -> None:
            try:
                ledger.ports.log.append(session_id, version, [UserMessageAdded(content=InlineText(f"w{n}"))])
                outcomes.append("won")
            except contextledger.ConcurrencyConflictError:
                outcomes.append("conflict")

        threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(outcomes) == ["conflict", "conflict", "conflict", "won"]
        assert ledger.version(session_id) == version + 1

    def test_several_sessions_start_in_one_transaction(self, ledger):
        """start_sessions stores every session of the batch, each with its messages and key."""
        ids = ledger.start_sessions(
            [
                {
                    "session_id": "a",
                    "messages": [{"role": "user", "content": "hi"}],
                    "idempotency_key": "k-a",
                },
                {"session_id": "b", "system_prompt": "s", "idempotency_key": "k-b"},
            ]
        )
        assert ids == ["a", "b"]
        assert (ledger.version("a"), ledger.version("b")) == (2, 1)
        assert ledger.ports.log.lookup_idempotency_key("a", "k-a") == (1, 2)

    def test_versions_reads_every_head_at_once(self, ledger):
        """``versions`` gives each stream's last position as ``version`` does: 0 for none, at any count.

        Past 500 streams (one statement's share on SQLite) and on a stream of 300 events, whose head
        is its last position, not the count of rows a scan would stop at.
        """
        long = ledger.start_session(session_id="long")
        for i in range(299):
            ledger.add_user_message(long, f"message {i}")
        short = self._session(ledger)
        ledger.record_summary(short, covers_from=2, covers_through=3, text="a summary", produced_at=3)
        side = f"{short}::summaries"
        unknown = [f"nobody-{i}" for i in range(600)]
        asked = [long, *unknown[:300], short, side, "bad\x00name", *unknown[300:], long]
        found = ledger.ports.log.versions(asked)
        assert found == {long: 300, short: 3, side: 1, "bad\x00name": 0} | dict.fromkeys(unknown, 0)
        assert all(found[s] == ledger.ports.log.version(s) for s in (long, short, side, "nobody-7"))
        assert ledger.ports.log.versions([]) == {}

    def test_a_bad_session_in_a_batch_writes_no_session(self, ledger):
        """One invalid session (a result for a call never issued) keeps the whole batch out."""
        self._session(ledger)
        before = self.snapshot(ledger)
        with pytest.raises(contextledger.UnknownToolCallError):
            ledger.start_sessions(
                [
                    {"session_id": "good", "messages": [{"role": "user", "content": "hi"}]},
                    {"session_id": "bad", "messages": [{"role": "tool", "call_id": "zz", "content": "x"}]},
                ]
            )
        assert self.snapshot(ledger) == before

    def test_a_conflict_in_a_multi_stream_append_writes_no_stream(self, ledger):
        """If one stream of a batch conflicts at the store, no stream of the batch is written."""
        taken = self._session(ledger)
        before = self.snapshot(ledger)
        appends = [
            StreamAppend(stream_id="fresh", expected_version=0, events=(SessionStarted(session_id="fresh"),)),
            StreamAppend(stream_id=taken, expected_version=0, events=(SessionStarted(session_id=taken),)),
        ]
        with pytest.raises(contextledger.ConcurrencyConflictError):
            ledger.ports.log.append_streams(appends)
        assert self.snapshot(ledger) == before

    def test_projection_snapshots_are_saved_replaced_and_loaded(self, ledger):
        """A snapshot comes back by name; saving it again replaces it."""
        store: RecorderEventStore = ledger.ports.log
        assert store.load_snapshot("render/x") is None
        store.save_snapshot("render/x", 10, b"\x01\x02")
        store.save_snapshot("render/x", 25, b"\x03")
        assert store.load_snapshot("render/x") == (25, b"\x03")

    def test_token_counts_are_cached_per_tokenizer(self, ledger):
        """Saved counts come back for their tokenizer only."""
        store: RecorderEventStore = ledger.ports.log
        store.save_token_counts("tok-a", {"h1": 5, "h2": 7})
        assert store.load_token_counts("tok-a", ["h1", "h2", "h3"]) == {"h1": 5, "h2": 7}
        assert store.load_token_counts("tok-b", ["h1"]) == {}

    def test_token_counts_keep_the_first_count_of_a_key(self, ledger):
        """A key saved again keeps its first count; any key text round-trips; an empty save writes nothing."""
        store: RecorderEventStore = ledger.ports.log
        odd = ['quote"back\\slash', "ünï\ncode 🙂", "", "h1"]
        store.save_token_counts("tok-a", {"h1": 5})
        store.save_token_counts("tok-a", dict.fromkeys(odd, 9))
        store.save_token_counts("tok-a", {})
        assert store.load_token_counts("tok-a", odd) == {**dict.fromkeys(odd, 9), "h1": 5}

    def test_started_event_keeps_its_fields(self, ledger):
        """The session start carries system prompt, model, tools and metadata."""
        session_id = ledger.start_session(
            system_prompt="sys",
            model="gpt-x",
            tools=[{"name": "ls", "description": "list", "parameters": {"type": "object"}}],
            metadata={"team": "a"},
        )
        started = ledger.events(session_id)[0].event
        assert isinstance(started, SessionStarted)
        assert (started.system_prompt, started.model, started.tools[0].name, started.metadata) == (
            "sys",
            "gpt-x",
            "ls",
            {"team": "a"},
        )


class TestMemoryStore(EventStoreContract):
    """The contract on the in-memory store."""

    @pytest.fixture
    def url(self) -> str:
        """The in-memory URL."""
        return "memory://"

    def snapshot(self, ledger):
        """Every stored row, blob and key of the in-memory recorder."""
        recorder = ledger.ports.log.recorder
        return (list(recorder.rows), dict(recorder._blobs), dict(recorder._idempotency))


class TestSQLiteStore(EventStoreContract):
    """The contract on an embedded SQLite file."""

    @pytest.fixture
    def url(self, tmp_path: Path) -> str:
        """A fresh SQLite file."""
        return f"sqlite:///{tmp_path / 'ledger.db'}"

    def snapshot(self, ledger):
        """The bytes of the database file and its write-ahead log, plus a logical dump."""
        path = Path(ledger.store_url.removeprefix("sqlite:///"))
        files = tuple(
            hashlib.sha256(p.read_bytes()).hexdigest() if p.exists() else None
            for p in (path, path.with_name(path.name + "-wal"))
        )
        with sqlite3.connect(path) as conn:
            dump = list(conn.iterdump())
        return files, dump

    def test_locked_database_is_a_typed_unavailable_error(self, tmp_path):
        """A write lock held past the busy timeout surfaces as StoreUnavailableError, not sqlite3's error."""
        path = tmp_path / "locked.db"
        with contextledger.open_ledger(f"sqlite:///{path}?timeout=0.2") as ledger:
            session_id = self._session(ledger)
            blocker = sqlite3.connect(path, timeout=0.1)
            blocker.execute("BEGIN IMMEDIATE")
            try:
                with pytest.raises(contextledger.StoreUnavailableError, match="locked"):
                    ledger.add_user_message(session_id, "blocked")
            finally:
                blocker.rollback()
                blocker.close()
            assert ledger.version(session_id) == 3

    def test_missing_folder_is_a_config_error(self, tmp_path):
        """A SQLite URL into a folder that does not exist is refused clearly."""
        with pytest.raises(contextledger.ConfigError, match="does not exist"):
            contextledger.open_ledger(f"sqlite:///{tmp_path / 'no' / 'such' / 'x.db'}")


class TestPostgresStore(EventStoreContract):
    """The contract on a real PostgreSQL server (a fresh schema per test)."""

    @pytest.fixture
    def url(self, pg_url: str) -> str:
        """A fresh schema on the test server."""
        return pg_url

    def snapshot(self, ledger):
        """Every row of every contextledger table in the schema, in key order."""
        base, _, query = ledger.store_url.partition("?")
        schema = query.removeprefix("schema=")
        with psycopg.connect(base) as conn:
            tables = [
                row[0]
                for row in conn.execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = %s ORDER BY 1",
                    (schema,),
                )
            ]
            return {
                table: conn.execute(f'SELECT * FROM "{schema}"."{table}" ORDER BY 1, 2').fetchall()
                for table in tables
            }

    def test_unreachable_server_is_a_typed_unavailable_error(self):
        """A server that does not answer surfaces as StoreUnavailableError."""
        with pytest.raises(contextledger.StoreUnavailableError):
            contextledger.open_ledger("postgresql://postgres@127.0.0.1:1/test")
