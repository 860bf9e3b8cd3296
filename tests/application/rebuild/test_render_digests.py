"""A rebuild's comparison comes from the render digests the build wrote, and equals rendering every row."""

from __future__ import annotations

import hashlib

import msgspec
import pytest
from contextledger.adapters.store.projections import RecorderProjections
from contextledger.application.rebuild.blue_green import RebuildSpec, build_version, compare_versions
from contextledger.application.rebuild.projection_runner import CONTEXT_VIEW
from contextledger.application.rebuild.rebuild import rebuild
from contextledger.application.rebuild.render_digest import (
    DIGEST_FORMAT,
    EVICTING,
    RenderDigest,
    by_address,
    decode_digest,
    digests_of,
    encode_digest,
    state_digest,
)
from contextledger.application.render.context_rows import row_state
from contextledger.domain.content import BlobText, InlineText
from contextledger.domain.errors import PinnedOverBudgetError
from contextledger.domain.events import AssistantMessageAdded, ToolResultRecorded, UserMessageAdded
from contextledger.projections.context import RenderedContext
from contextledger.projections.counting import CountedEvent
from contextledger.projections.dispositions import dispositions_of
from contextledger.projections.fold import Projector
from contextledger.projections.ingest import PENDING_TEXT
from contextledger.projections.presets import get_preset
from contextledger.projections.render import messages_as_logged
from hypothesis import HealthCheck, event, given, settings

from tests.application.rebuild.conftest import rendered_differently
from tests.projections.projection_helpers import Words, count_all, policies, resolve, sessions


@pytest.fixture
def ledger(two_transcripts):
    """The SQLite ledger holding two real transcripts (``two_transcripts``)."""
    return two_transcripts


def _two_versions(ledger):
    views = RecorderProjections(ledger.ports.log)
    live = build_version(ledger, views, views, policy=get_preset("default"), budget=16_000)
    views.activate(CONTEXT_VIEW, live.projection)
    candidate = build_version(ledger, views, views, policy=get_preset("threshold"), budget=16_000)
    return views, live.projection, candidate.projection


def test_the_comparison_from_digests_equals_the_one_from_rendering_every_row(ledger):
    """Digests written by the build give the same totals, evictions and differing sessions as renders."""
    views, live, candidate = _two_versions(ledger)
    assert len(views.row_keys(digests_of(candidate))) == 2
    from_digests = compare_versions(ledger, views, candidate)
    views.drop(digests_of(live))  # versions written before digests: every row is rendered again
    views.drop(digests_of(candidate))
    from_rows = compare_versions(ledger, views, candidate)
    assert from_digests == from_rows
    assert from_digests.live is not None
    assert from_digests.candidate.tokens != from_digests.live.tokens
    assert from_digests.differing == rendered_differently(ledger, "default", "threshold")


def test_the_comparison_reads_no_event_again(ledger, monkeypatch):
    """Comparing two built versions decodes no event: the log was read once, by the build."""
    views, _, candidate = _two_versions(ledger)
    reads: list[str] = []
    original = ledger.events
    monkeypatch.setattr(
        ledger, "events", lambda session_id, **kw: reads.append(session_id) or original(session_id, **kw)
    )
    compare_versions(ledger, views, candidate)
    assert reads == []


def test_a_rebuild_without_comparison_builds_and_switches(ledger):
    """``compare=False`` builds and switches as usual and reports no comparison."""
    views = RecorderProjections(ledger.ports.log)
    spec = RebuildSpec(get_preset("default").model_dump_json(), 16_000)
    result = rebuild(ledger, spec, switch=True, compare=False)
    assert result.comparison is None
    assert views.active(CONTEXT_VIEW) == result.version
    assert len(views.row_keys(result.version)) == 2


def test_a_rebuild_compares_with_the_digests_it_kept_which_are_those_it_stored(ledger, monkeypatch):
    """A one-process rebuild compares with the digests it wrote and kept: those it stored.

    The comparison equals the one read back from the store alone.
    """
    from contextledger.application.rebuild import rebuild as rebuild_module  # noqa: PLC0415

    views = RecorderProjections(ledger.ports.log)
    rebuild(ledger, RebuildSpec(get_preset("default").model_dump_json(), 16_000), switch=True)
    handed: list[dict[str, RenderDigest] | None] = []
    original = rebuild_module.compare_versions

    def spying(*args, kept=None, **kwargs):
        handed.append(None if kept is None else dict(kept))
        return original(*args, kept=kept, **kwargs)

    monkeypatch.setattr(rebuild_module, "compare_versions", spying)
    result = rebuild(ledger, RebuildSpec(get_preset("threshold").model_dump_json(), 16_000))
    (kept,) = handed
    assert kept is not None
    stored = views.load_rows(digests_of(result.version), views.row_keys(result.version))
    assert kept == {key: decode_digest(data) for key, (_, data) in stored.items()}
    assert len(kept) == 2
    assert result.comparison == original(ledger, views, result.version)
    assert result.comparison is not None
    assert result.comparison.differing == rendered_differently(ledger, "default", "threshold")


def test_the_candidate_digests_held_are_used_and_not_read_back(ledger, monkeypatch):
    """``kept`` stands for the stored digests of the sessions it names; only the others are read."""
    views, live, candidate = _two_versions(ledger)
    keys = views.row_keys(candidate)
    stored = compare_versions(ledger, views, candidate)
    reads: list[tuple[str, list[str]]] = []
    load_rows = views.load_rows
    monkeypatch.setattr(
        views, "load_rows", lambda name, wanted: reads.append((name, list(wanted))) or load_rows(name, wanted)
    )
    held = {key: decode_digest(row[1]) for key, row in load_rows(digests_of(candidate), keys).items()}
    assert compare_versions(ledger, views, candidate, kept=held) == stored
    assert reads == [(digests_of(live), keys)]  # the live version's only
    reads.clear()
    live_digest = decode_digest(load_rows(digests_of(live), keys[:1])[keys[0]][1])
    assert live_digest is not None
    one = {keys[0]: live_digest}  # the first session held as rendering like the live version
    mixed = compare_versions(ledger, views, candidate, kept=one)
    assert reads == [(digests_of(candidate), keys[1:]), (digests_of(live), keys)]
    assert mixed.differing == keys[1:]
    assert mixed.candidate.tokens == stored.candidate.tokens - held[keys[0]].tokens + live_digest.tokens


def _shows_the_log(context: RenderedContext) -> bool:
    """The render shows the log as it is: every decision keeps or pins, every message is as logged.

    A message as logged is of kind "message", or the placeholder of a call still waiting for its result.
    """
    return all(d.action in ("kept", "pinned") for d in context.decisions) and all(
        m.kind == "message" or (m.kind == "stub" and not m.sources and m.text == PENDING_TEXT)
        for m in context.messages
    )


_RANGE_RULES = frozenset({"low-water", "window", "summary", "summary:superseded", "orphan-result"})
"""Rules of the ranges out of the window (dropped or summarized), named alike by decisions and fates."""


def _digest_of_render(context: RenderedContext, logged: dict[int, str]) -> RenderDigest:
    """The digest by its definition: the render's evicted positions counted per rule, its messages hashed.

    ``context`` is rendered with ``by_address``: a blob's text stands in by its content address; a
    message from one event showing that event's logged text (``logged``: read from the events, not
    the state) stands in by the event's position. A render that shows the log as it is hashes the
    number of logged messages it shows instead, under any tokenizer (ADR 0069, 0070). Evictions: each
    logged position once, by its fate in the payload's dispositions (a position of no decision is no
    eviction).
    """
    if _shows_the_log(context):
        shown = sum(1 for m in context.messages if m.sources)  # the placeholders have no source
        named = hashlib.sha256(msgspec.msgpack.encode((b"\x00as logged", shown))).digest()
        return RenderDigest(context.tokens, {}, named[:16], format=DIGEST_FORMAT)
    evictions: dict[str, int] = {}
    for run in dispositions_of(context):
        if run.disposition in EVICTING and run.rule != "not-rendered":
            evictions[run.rule] = evictions.get(run.rule, 0) + run.last - run.first + 1
    shown = [
        msgspec.structs.replace(m, text=f"\x00at:{m.sources[0]}")
        if len(m.sources) == 1 and logged.get(m.sources[0]) == m.text
        else m
        for m in context.messages
    ]
    messages = hashlib.sha256(msgspec.msgpack.encode(shown)).digest()[:16]
    return RenderDigest(context.tokens, evictions, messages, format=DIGEST_FORMAT)


def _logged(counted: CountedEvent) -> dict[int, str]:
    """The non-empty inline text a message event logged, by its position (none for other events)."""
    content = getattr(counted.event, "content", None)
    is_message = isinstance(counted.event, UserMessageAdded | AssistantMessageAdded | ToolResultRecorded)
    logged = is_message and isinstance(content, InlineText) and content.text
    return {counted.position: content.text} if logged else {}  # type: ignore[union-attr]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session=sessions(), policy=policies())
def test_the_digest_of_a_state_equals_the_digest_of_its_render(session, policy):
    """At every position: the digest bytes of the render (its decisions counted), or the same refusal."""
    words = Words()
    projector = Projector(policy, words)
    state = projector.start()
    evicted = False
    logged: dict[int, str] = {}
    for counted in count_all(session, words):
        state = projector.evolve(state, counted)
        logged.update(_logged(counted))
        try:
            expected = _digest_of_render(projector.render(state, by_address), logged)
            assert projector.render(state, by_address) == projector.render(state, resolve)  # no blobs here
        except PinnedOverBudgetError:
            with pytest.raises(PinnedOverBudgetError):
                state_digest(projector, state)
            continue
        digest = state_digest(projector, state)
        assert (digest.tokens, digest.messages, digest.failed) == (expected.tokens, expected.messages, "")
        # a shown message cut or stubbed counts under its own entry's rule, which dispositions name only
        # when a decision of the same action covers it: the totals agree, and so does every range's rule
        assert sum(digest.evictions.values()) == sum(expected.evictions.values())
        assert {r: n for r, n in digest.evictions.items() if r in _RANGE_RULES} == {
            r: n for r, n in expected.evictions.items() if r in _RANGE_RULES
        }
        evicted = evicted or bool(expected.evictions)
    event(f"evicted: {evicted}")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session=sessions(), first=policies(), second=policies())
def test_under_two_policies_digests_agree_exactly_where_the_renders_do(session, first, second):
    """One session folded under two policies: at every position, equal digests iff equal rendered messages.

    The renders read the real texts; a render shown as logged is digested without rendering (ADR 0069), so
    this is what makes its key sound: never alike for renders that differ, never apart for equal ones.
    """
    words = Words()
    a, b = Projector(first, words), Projector(second, words)
    state_a, state_b = a.start(), b.start()
    seen: set[tuple[bool, bool, bool]] = set()
    for counted in count_all(session, words):
        state_a, state_b = a.evolve(state_a, counted), b.evolve(state_b, counted)
        try:
            same = a.render(state_a, resolve).messages == b.render(state_b, resolve).messages
        except PinnedOverBudgetError:
            continue
        assert (state_digest(a, state_a).messages == state_digest(b, state_b).messages) == same
        seen.add((messages_as_logged(state_a) is not None, messages_as_logged(state_b) is not None, same))
    for logged_a, logged_b, same in seen:
        event(f"as logged: {logged_a}/{logged_b}, same render: {same}")


def test_digests_hash_alike_exactly_when_the_renders_show_the_same_texts(ledger, monkeypatch):
    """Blobs stand in by their addresses, yet two versions' digests differ exactly where their renders do.

    Versions of two real sessions (one with an 868 KB tool output) under budgets that keep, cut, stub or
    drop that blob, and one under a copy of a policy by another name (the same renders): per session and
    pair of versions, equal digests iff equal rendered messages (the real texts, blobs read). No blob is
    read to make a digest.
    """
    views = RecorderProjections(ledger.ports.log)
    renamed = get_preset("default").model_copy(update={"name": "default-again"})
    default, threshold, nexus = get_preset("default"), get_preset("threshold"), get_preset("nexus")
    chosen = [(default, 200_000), (renamed, 200_000), (default, 16_000), (threshold, 16_000), (nexus, 64_000)]
    built = [build_version(ledger, views, views, policy=policy, budget=budget) for policy, budget in chosen]
    renders: dict[tuple[int, str], tuple[object, bytes]] = {}
    blobs_shown = 0
    for index, runner in enumerate(built):
        for key in views.row_keys(runner.projection):
            state = row_state(ledger, key, views.load_row(runner.projection, key)[1])
            shown = runner.projector.render(state, ledger.text).messages
            blobs_shown += sum(isinstance(e.content, BlobText) and e.text is None
                               for g in state.window.groups for e in g.entries)  # fmt: skip
            reads: list[str] = []
            monkeypatch.setattr(ledger, "text", lambda t, reads=reads: reads.append("read") or "")
            digest = state_digest(runner.projector, state)
            monkeypatch.undo()
            assert reads == []
            renders[index, key] = (shown, digest.messages)
    assert blobs_shown > 0  # some versions show a blob whole
    outcomes = set()
    for (a, key), (shown, digest) in renders.items():
        for b in range(a + 1, len(built)):
            other_shown, other_digest = renders[b, key]
            assert (digest == other_digest) == (shown == other_shown), (a, b, key)
            outcomes.add(shown == other_shown)
    assert outcomes == {True, False}  # the budgets give equal renders and different ones


def test_a_digest_of_an_earlier_format_is_rendered_again(ledger):
    """Digests of an earlier format (content hashed) are not compared with these: their rows are rendered."""
    views, live, candidate = _two_versions(ledger)
    expected = compare_versions(ledger, views, candidate)
    stale = encode_digest(RenderDigest(1, {}, b"an older format"))  # no format field: format 1
    written = views.load_rows(digests_of(live), views.row_keys(live))
    rows = {key: (row[0], stale) for key, row in written.items()}
    views.commit(digests_of(live), 0, rows)  # the test writes them alone (a build writes them with its rows)
    assert compare_versions(ledger, views, candidate) == expected


def test_a_blob_shown_whole_is_hashed_by_its_address():
    """Two renders that differ only in which blob a message shows hash differently; the same blob alike.

    The renders are not shown as logged (an orphan result was dropped), so they are digested from their
    messages. (One shown as logged is named by its number of messages: within a session's log, which never
    changes, that number names the messages, blobs included.)
    """
    from contextledger.domain.events import SessionStarted  # noqa: PLC0415

    projector = Projector(get_preset("default"), Words())

    def digest_showing(sha256: str) -> bytes:
        blob = BlobText(sha256=sha256, chars=9_000, preview="the same preview")
        started = SessionStarted(session_id="s", system_prompt="sys")
        orphan = ToolResultRecorded(call_id="none", tool_name="t", content=InlineText("late"))
        state = projector.fold(
            [
                CountedEvent(position=1, event=started, tokens=(1, 0)),
                CountedEvent(position=2, event=UserMessageAdded(content=blob), tokens=(40,)),
                CountedEvent(position=3, event=orphan, tokens=(1,)),
            ]
        )
        assert isinstance(state.window.groups[0].entries[0].content, BlobText)  # shown whole
        assert messages_as_logged(state) is None
        return state_digest(projector, state).messages

    assert digest_showing("a" * 64) == digest_showing("a" * 64)
    assert digest_showing("a" * 64) != digest_showing("b" * 64)
