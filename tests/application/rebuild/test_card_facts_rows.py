"""The card facts a rebuild keeps: a later rebuild reading them writes what one finding them again writes."""

from __future__ import annotations

import base64
import shutil
import sqlite3
import threading
from pathlib import Path

import contextledger
import msgspec
import pytest
from contextledger.application.rebuild.batch_reads import BatchReads
from contextledger.application.rebuild.card_facts import BLOCK, CARD_FACTS, CardFacts
from contextledger.application.rebuild.projection_runner import ProjectionRunner
from contextledger.domain.content import InlineText
from contextledger.domain.events import AssistantMessageAdded, ToolResultRecorded
from contextledger.projections.card_state import NO_FACTS, MessageFacts
from contextledger.projections.counting import CountedEvent
from contextledger.projections.presets import get_preset

from tests.application.rebuild.test_projection_runner import _views, full_db  # noqa: F401 - the fixture

_THRESHOLD = "threshold"


def _rows(path: Path) -> dict[tuple[str, str], tuple[int, bytes]]:
    """Every projection row but the card facts, by (projection, key)."""
    with sqlite3.connect(path) as db:
        found = db.execute("SELECT projection, key, position, state FROM ledger_projection_rows").fetchall()
    return {(p, k): (at, data) for p, k, at, data in found if p != CARD_FACTS}


def _rebuild(path: Path, policy: str) -> str:
    with contextledger.open_ledger(f"sqlite:///{path}") as ledger:
        views = _views(ledger)
        runner = ProjectionRunner(ledger, views, views, policy=policy, batch_size=300)
        assert runner.run().failed == {}
        return runner.projection


def _facts_rows(path: Path) -> dict[str, tuple[int, bytes]]:
    with sqlite3.connect(path) as db:
        found = db.execute(
            "SELECT key, position, state FROM ledger_projection_rows WHERE projection = ?", (CARD_FACTS,)
        ).fetchall()
    return {key: (at, data) for key, at, data in found}


def test_a_rebuild_reading_kept_facts_writes_the_rows_of_one_finding_them(full_db, tmp_path):  # noqa: F811
    """A rebuild under another policy writes the same rows whether it reads the kept facts or not.

    Context rows, digests and token rows are equal when it reads them, finds them all again (none
    kept), or finds unreadable ones; the rows it writes then are the first rebuild's.
    """
    first = tmp_path / "first.db"
    shutil.copy(full_db, first)
    _rebuild(first, "default")
    kept = _facts_rows(first)
    with contextledger.open_ledger(f"sqlite:///{first}") as ledger:
        heads = {s.session_id: ledger.version(s.session_id) for s in ledger.sessions()}
    reached: dict[str, int] = {}
    for key, (at, _) in kept.items():
        session_id, _, block = key.rpartition("/")
        assert at // BLOCK == int(block)  # a row stays in its block
        reached[session_id] = max(reached.get(session_id, 0), at)
    assert reached == heads  # every session's facts looked at up to its head
    decode = msgspec.msgpack.Decoder(dict[int, MessageFacts]).decode
    assert any(decode(data) for _, data in kept.values())  # the transcripts hold decisions or plans
    dumps = {}
    for how in ("read", "missing", "unreadable"):
        copy = tmp_path / f"{how}.db"
        shutil.copy(first, copy)
        with sqlite3.connect(copy) as db:
            if how == "missing":
                db.execute("DELETE FROM ledger_projection_rows WHERE projection = ?", (CARD_FACTS,))
            elif how == "unreadable":
                db.execute(
                    "UPDATE ledger_projection_rows SET state = x'c1' WHERE projection = ?", (CARD_FACTS,)
                )
        _rebuild(copy, _THRESHOLD)
        dumps[how] = _rows(copy)
        assert _facts_rows(copy) == kept  # found again: the same rows
    assert dumps["read"] == dumps["missing"] == dumps["unreadable"]


def test_a_rebuild_without_the_card_keeps_no_facts(full_db, tmp_path):  # noqa: F811
    """A policy without the card never looks for facts, so it writes none."""
    copy = tmp_path / "plain.db"
    shutil.copy(full_db, copy)
    default = get_preset("default")
    plain = default.model_copy(update={"card": default.card.model_copy(update={"enabled": False})})
    with contextledger.open_ledger(f"sqlite:///{copy}") as ledger:
        views = _views(ledger)
        assert ProjectionRunner(ledger, views, views, policy=plain).run().failed == {}
    assert _facts_rows(copy) == {}


def test_facts_grow_over_contiguous_positions_only(ledger):
    """A row says "looked at up to p": it grows from its block's first position, and a gap stops it."""
    positions = [1, 2, 4, BLOCK - 1, BLOCK, BLOCK + 1]
    text = "I decided to pin it. Then more."
    events = [
        CountedEvent(
            position=position,
            event=AssistantMessageAdded(content=InlineText(text if position in {2, BLOCK + 1} else "ok")),
        )
        for position in positions
    ]
    facts = CardFacts(ledger.ports.projections).batch({"s": events})
    facts.attach("s", events)
    assert all(e.card is not None for e in events)
    rows = facts.rows()
    assert {key: at for key, (at, _) in rows.items()} == {"s/0": 2, "s/1": BLOCK + 1}
    decode = msgspec.msgpack.Decoder(dict[int, MessageFacts]).decode
    decided = MessageFacts(decisions=("I decided to pin it.",))
    assert decode(rows["s/0"][1]) == {2: decided}  # no entry for the messages without facts
    assert decode(rows["s/1"][1]) == {BLOCK + 1: decided}
    assert NO_FACTS not in decode(rows["s/0"][1]).values()


def test_forgetting_a_session_erases_its_card_facts(tmp_path, monkeypatch):
    """The facts hold the session's words, so they are keyed by the session and erased with it."""
    monkeypatch.setenv("CIPHER_KEY", base64.b64encode(b"m" * 32).decode())
    url = f"sqlite:///{tmp_path / 'keyed.db'}"
    with contextledger.open_ledger(url) as ledger:
        for session_id in ("gone", "kept"):
            ledger.start_session(session_id=session_id, system_prompt="sys")
            ledger.add_user_message(session_id, "please keep the cache")
            ledger.add_assistant_message(session_id, "I decided to keep the cache. Done.")
        views = _views(ledger)
        ProjectionRunner(ledger, views, views).run()
        assert sorted(views.row_keys(CARD_FACTS)) == ["gone/0", "kept/0"]
        ledger.forget("gone", reason="asked to")
        assert views.row_keys(CARD_FACTS) == ["kept/0"]


class _Rows:
    """Card facts rows held in memory (the ``ProjectionRows`` read a batch makes)."""

    def __init__(self, rows: dict[str, tuple[int, bytes]]) -> None:
        self.rows = rows

    def load_rows(self, name: str, keys: list[str]) -> dict[str, tuple[int, bytes]]:
        assert name == CARD_FACTS
        return {key: self.rows[key] for key in keys if key in self.rows}


def test_facts_read_back_are_the_facts_found():
    """Events whose facts a row keeps get those facts (or none), as finding them gave; the rest are found.

    Each ``attach`` gets events of its own (as a batch does): it sets their facts in place.
    """
    texts = ["ok", "I decided to pin it. Then more.", "- [ ] one\n- [x] two", "fine"]

    def fresh(upto: int = 40) -> list[CountedEvent]:
        return [
            CountedEvent(position=p, event=AssistantMessageAdded(content=InlineText(texts[p % len(texts)])))
            for p in range(1, upto + 1)
        ]

    first = fresh()
    found = CardFacts(_Rows({})).batch({"s": first})
    found.attach("s", first)
    rows = found.rows()
    assert set(rows) == {"s/0"}
    assert {e.card for e in first} > {NO_FACTS}
    assert None not in {e.card for e in first}
    again_events = fresh(30)
    again = CardFacts(_Rows(rows)).batch({"s": again_events})
    again.attach("s", again_events)
    assert again_events == first[:30]  # all kept: read, never looked for
    assert again.rows() == {}  # nothing grew
    longer_events = fresh()
    longer = CardFacts(_Rows({"s/0": (20, rows["s/0"][1])})).batch({"s": longer_events})
    longer.attach("s", longer_events)
    assert longer_events == first  # kept up to 20, found after it
    assert longer.rows()["s/0"][0] == 40


def test_attach_leaves_facts_already_given_and_other_events_alone():
    """An event that carries facts keeps them (not looked for again); a tool result gets none."""
    given = MessageFacts(decisions=("I decided this earlier.",))
    carrying = CountedEvent(position=1, event=AssistantMessageAdded(content=InlineText("ok")), card=given)
    result = CountedEvent(
        position=2, event=ToolResultRecorded(call_id="c", tool_name="t", content=InlineText("I decided."))
    )
    message = CountedEvent(position=3, event=AssistantMessageAdded(content=InlineText("I decided to go.")))
    facts = CardFacts(_Rows({"s/0": (1, msgspec.msgpack.encode({}))})).batch({"s": [carrying]})
    facts.attach("s", [carrying, result, message])
    assert carrying.card is given  # kept up to 1: its own facts stay
    assert result.card is None
    assert message.card == MessageFacts(decisions=("I decided to go.",))


def _reads_by_thread(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The name of the thread of each ``CardFacts.read`` from now on."""
    threads: list[str] = []
    read = CardFacts.read

    def recorded(self: CardFacts, keys: list[str]) -> dict[str, tuple[int, bytes]]:
        threads.append(threading.current_thread().name)
        return read(self, keys)

    monkeypatch.setattr(CardFacts, "read", recorded)
    return threads


def test_a_rebuild_after_a_config_change_reads_its_card_facts_ahead(full_db, tmp_path, monkeypatch):  # noqa: F811
    """Every batch of a rebuild finding every fact kept takes the rows read beside the batch before it."""
    path = tmp_path / "ledger.db"
    shutil.copy(full_db, path)
    _rebuild(path, "default")
    threads = _reads_by_thread(monkeypatch)
    _rebuild(path, _THRESHOLD)
    assert len(threads) > 3
    assert set(threads) == {"contextledger-card-facts"}


def test_a_catch_up_writing_facts_takes_no_rows_read_before_they_were_written(
    full_db,  # noqa: F811
    tmp_path,
    monkeypatch,
):
    """Once a batch wrote card facts, later batches read theirs as they fold (rows read ahead may be stale).

    The rows it writes (facts included) are those of a first rebuild that reads nothing ahead.
    """
    ahead, alone = tmp_path / "ahead.db", tmp_path / "alone.db"
    for path in (ahead, alone):
        shutil.copy(full_db, path)
    threads = _reads_by_thread(monkeypatch)
    _rebuild(ahead, "default")
    assert "contextledger-card-facts" in threads[:1]  # the first batch's rows were read ahead
    assert threads[-1] == threading.main_thread().name
    monkeypatch.setattr(BatchReads, "facts", lambda *_: None)  # read ahead, never taken
    _rebuild(alone, "default")
    assert _facts_rows(ahead) == _facts_rows(alone)
    assert _rows(ahead) == _rows(alone)
