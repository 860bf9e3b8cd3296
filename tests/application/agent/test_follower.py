"""Following an event-sourced agent: its notifications become ledger messages, once, across restarts."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any
from uuid import uuid4

import contextledger
import pytest
from contextledger import AssistantMessage, ToolResult, UserMessage
from contextledger.adapters.follow.eventsourcing_upstream import EventsourcingUpstream
from contextledger.application.agent.follower import Follower, Skipped
from contextledger.domain.events import AssistantMessageAdded, ToolResultRecorded, UserMessageAdded
from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event
from eventsourcing.persistence import StoredEvent


class AgentTurn(Aggregate):
    """A tiny agent's own aggregate: what the user said, the model replied, the tools returned."""

    def __init__(self, task: str) -> None:
        self.task = task

    @event("UserSaid")
    def user_said(self, text: str) -> None:
        """The user spoke."""

    @event("ModelReplied")
    def model_replied(self, text: str, calls: list[dict[str, Any]]) -> None:
        """The model answered, maybe calling tools."""

    @event("ToolReturned")
    def tool_returned(self, call_id: str, output: str) -> None:
        """A tool returned."""

    @event("MoodChanged")
    def mood_changed(self, mood: str) -> None:
        """Something the ledger has no use for (not in the mapping)."""


class AgentApp(Application[Any]):
    """The agent's application: its event store is its source of truth."""

    def start(self, task: str) -> Any:
        """Start a turn aggregate."""
        turn = AgentTurn(task)
        self.save(turn)
        return turn.id

    def act(self, turn_id: Any, method: str, **kwargs: Any) -> None:
        """Apply one command to a turn."""
        turn = self.repository.get(turn_id)
        getattr(turn, method)(**kwargs)
        self.save(turn)


MAPPING: dict[str, Any] = {
    "AgentTurn.Created": lambda e: UserMessage(content=e.task),
    "AgentTurn.UserSaid": lambda e: UserMessage(content=e.text),
    "AgentTurn.ModelReplied": lambda e: AssistantMessage(content=e.text or None, tool_calls=e.calls),
    "AgentTurn.ToolReturned": lambda e: ToolResult(call_id=e.call_id, content=e.output),
}


def _script(app: AgentApp) -> Any:
    """Nine upstream notifications: a task, a tool round, an unmapped mood change, a follow-up."""
    turn = app.start("list the files")
    app.act(turn, "model_replied", text="", calls=[{"id": "c1", "name": "ls", "arguments": "{}"}])
    app.act(turn, "tool_returned", call_id="c1", output="a.txt b.txt")
    app.act(turn, "mood_changed", mood="curious")
    app.act(turn, "model_replied", text="a.txt and b.txt", calls=[])
    app.act(turn, "user_said", text="and their sizes?")
    app.act(turn, "model_replied", text="", calls=[{"id": "c2", "name": "du", "arguments": "{}"}])
    app.act(turn, "tool_returned", call_id="c2", output="1K 2K")
    app.act(turn, "model_replied", text="1K and 2K", calls=[])
    return turn


def _messages(ledger: contextledger.Ledger, session_id: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for recorded in ledger.events(session_id):
        event = recorded.event
        if isinstance(event, UserMessageAdded):
            out.append(("user", ledger.text(event.content)))
        elif isinstance(event, AssistantMessageAdded):
            out.append(
                ("assistant", ledger.text(event.content) or ",".join(c.name for c in event.tool_calls))
            )
        elif isinstance(event, ToolResultRecorded):
            out.append(("tool", ledger.text(event.content)))
    return out


EXPECTED = [
    ("user", "list the files"),
    ("assistant", "ls"),
    ("tool", "a.txt b.txt"),
    ("assistant", "a.txt and b.txt"),
    ("user", "and their sizes?"),
    ("assistant", "du"),
    ("tool", "1K 2K"),
    ("assistant", "1K and 2K"),
]


def _sqlite_app(path: Path) -> AgentApp:
    return AgentApp(env={"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(path)})


def test_follower_projects_the_upstream_agent_and_renders_its_context(ledger: contextledger.Ledger) -> None:
    """Every mapped notification becomes a ledger message of the aggregate's session; render sees them."""
    app = AgentApp()
    _script(app)
    follower = Follower(
        ledger, EventsourcingUpstream(app), MAPPING, session_options={"system_prompt": "be brief"}
    )
    report = follower.run()
    assert report.read == 9
    assert report.written == 8
    assert report.position == follower.position() == 9
    (session_id,) = report.sessions
    assert _messages(ledger, session_id) == EXPECTED
    rendered = contextledger.Renderer(ledger).render(session_id)
    assert rendered.system == "be brief"
    assert [m.role for m in rendered.messages] == [role for role, _ in EXPECTED]
    assert rendered.messages[-1].text == "1K and 2K"


def test_unmapped_event_type_is_skipped_and_reported_never_a_crash(ledger: contextledger.Ledger) -> None:
    """An event type the mapping does not know is skipped, reported with its id, and tracked past."""
    app = AgentApp()
    _script(app)
    report = Follower(ledger, EventsourcingUpstream(app), MAPPING).run()
    assert report.skipped == [
        Skipped(notification_id=4, type_name="AgentTurn.MoodChanged", reason="unmapped")
    ]
    again = Follower(ledger, EventsourcingUpstream(app), MAPPING).run()
    assert (again.read, again.written, again.skipped) == (0, 0, [])


@pytest.fixture(params=["sqlite", "postgres"])
def durable_url(request: pytest.FixtureRequest, sqlite_url: str) -> str:
    """A ledger that outlives its process: a SQLite file or a PostgreSQL schema."""
    return sqlite_url if request.param == "sqlite" else request.getfixturevalue("pg_url")


def test_restart_mid_stream_resumes_from_tracking_and_writes_nothing_twice(
    tmp_path: Path, durable_url: str
) -> None:
    """Stop after 3 notifications; a new follower on a reopened ledger resumes from its tracking.

    A crash between an append and the tracking update (tracking set back) replays as no-ops.
    """
    app = _sqlite_app(tmp_path / "agent.db")
    _script(app)
    with contextledger.open_ledger(durable_url) as first:
        report = Follower(first, EventsourcingUpstream(_sqlite_app(tmp_path / "agent.db")), MAPPING).run(
            limit=3, page=2
        )
        assert (report.read, report.position, report.written) == (3, 3, 3)
        (session_id,) = report.sessions
        assert _messages(first, session_id) == EXPECTED[:3]
    with contextledger.open_ledger(durable_url) as second:
        follower = Follower(second, EventsourcingUpstream(_sqlite_app(tmp_path / "agent.db")), MAPPING)
        assert follower.position() == 3
        report = follower.run()
        assert (report.read, report.written, report.replayed) == (6, 5, 0)
        assert _messages(second, session_id) == EXPECTED
        version = second.version(session_id)
        second.ports.snapshots.save_snapshot(follower.tracking_name, 1, b"{}")  # the crash window
        replay = Follower(second, EventsourcingUpstream(app), MAPPING).run()
        assert (replay.read, replay.written, replay.replayed, replay.position) == (8, 0, 7, 9)
        assert second.version(session_id) == version
        assert _messages(second, session_id) == EXPECTED


def test_follower_picks_up_new_upstream_notifications(ledger: contextledger.Ledger) -> None:
    """A later run handles only what the upstream agent recorded since the previous run."""
    app = AgentApp()
    turn = _script(app)
    follower = Follower(ledger, EventsourcingUpstream(app), MAPPING)
    (session_id,) = follower.run().sessions
    app.act(turn, "user_said", text="thanks")
    report = follower.run()
    assert (report.read, report.written, report.position) == (1, 1, 10)
    assert _messages(ledger, session_id)[-1] == ("user", "thanks")


def test_mapping_to_none_writes_nothing_and_a_bad_mapping_result_is_refused(
    ledger: contextledger.Ledger,
) -> None:
    """A mapping returning None writes nothing; a mapping returning text is refused with a typed error."""
    app = AgentApp()
    _script(app)
    quiet = Follower(
        ledger, EventsourcingUpstream(app), {**MAPPING, "AgentTurn.MoodChanged": lambda _e: None}
    )
    report = quiet.run()
    assert (report.written, report.skipped) == (8, [])
    bad = Follower(ledger, EventsourcingUpstream(app, name="other"), {"AgentTurn.Created": lambda e: e.task})
    with pytest.raises(contextledger.ValidationError):
        bad.run()
    assert bad.position() == 0


def test_upstream_in_the_ledgers_own_sqlite_file(tmp_path: Path) -> None:
    """The agent's event store and the ledger share one SQLite file; the follower reads and writes it."""
    path = tmp_path / "shared.db"
    app = _sqlite_app(path)
    _script(app)
    with contextledger.open_ledger(f"sqlite:///{path}") as ledger:
        report = Follower(ledger, EventsourcingUpstream(app), MAPPING).run()
        (session_id,) = report.sessions
        assert _messages(ledger, session_id) == EXPECTED
    assert app.notification_log.select(start=1, limit=10)[-1].id == 9  # upstream untouched


def test_two_followers_at_once_write_each_notification_once(tmp_path: Path, durable_url: str) -> None:
    """Two followers on two ledger connections (as two processes) racing: each message is written once.

    Same process and ledger: they run one after the other, and the second finds nothing to do.
    """
    app = _sqlite_app(tmp_path / "agent.db")
    _script(app)
    ledgers = [contextledger.open_ledger(durable_url) for _ in range(2)]
    reports: list[Any] = []
    errors: list[BaseException] = []

    def follow(ledger: contextledger.Ledger) -> None:
        try:
            upstream = EventsourcingUpstream(_sqlite_app(tmp_path / "agent.db"), name="agent")
            reports.append(Follower(ledger, upstream, MAPPING).run(page=1))
        except BaseException as error:  # noqa: BLE001 - reported by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=follow, args=(ledger,)) for ledger in ledgers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    (session_id,) = set().union(*(r.sessions for r in reports))
    assert _messages(ledgers[0], session_id) == EXPECTED
    shared: list[Any] = []
    upstream = EventsourcingUpstream(app, name="agent-2")
    threads = [
        threading.Thread(target=lambda: shared.append(Follower(ledgers[0], upstream, MAPPING).run(page=1)))
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(r.written for r in shared) == [0, 8]  # one ledger: one after the other
    for ledger in ledgers:
        ledger.close()


def test_an_event_class_this_process_cannot_import_is_skipped_and_reported(
    ledger: contextledger.Ledger,
) -> None:
    """A notification whose topic names no importable class is skipped as undecodable, not a crash."""
    app = AgentApp()
    turn = _script(app)
    gone = StoredEvent(
        originator_id=uuid4(), originator_version=1, topic="gone.module:Gone.Event", state=b"{}"
    )
    app.recorder.insert_events([gone])
    app.act(turn, "user_said", text="still there?")
    report = Follower(ledger, EventsourcingUpstream(app), MAPPING).run()
    assert report.skipped[-1] == Skipped(notification_id=10, type_name="Gone.Event", reason="undecodable")
    assert (report.read, report.written, report.position) == (11, 9, 11)
    (session_id,) = report.sessions
    assert _messages(ledger, session_id)[-1] == ("user", "still there?")
